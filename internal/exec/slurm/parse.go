package slurm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// NodeInfo is one node as `scontrol show -o node` describes it.
type NodeInfo struct {
	Name       string
	Addr       string // NodeAddr
	Hostname   string // NodeHostName
	State      string // State, e.g. IDLE, MIXED+DRAIN, DOWN*+NOT_RESPONDING
	Partitions []string
	GPUs       []GPUGres // from Gres=
}

// GPUGres is one gpu entry of a node's Gres: its type ("" untyped) and count.
type GPUGres struct {
	Type  string
	Count int
}

// Down reports whether Slurm cannot run jobs on the node at all (down,
// not responding, failed, powered off).
func (n NodeInfo) Down() bool {
	for _, f := range stateFlags(n.State) {
		switch f {
		case "DOWN", "NOT_RESPONDING", "FAIL", "FAILING", "POWERED_DOWN", "POWERING_DOWN", "UNKNOWN", "FUTURE", "NO_RESPOND":
			return true
		}
	}
	return false
}

// Drained reports whether the node takes no new jobs (drain, drained or
// draining, reserved for maintenance).
func (n NodeInfo) Drained() bool {
	for _, f := range stateFlags(n.State) {
		switch f {
		case "DRAIN", "DRAINED", "DRAINING", "MAINT", "REBOOT_REQUESTED", "REBOOT_ISSUED":
			return true
		}
	}
	return false
}

// stateFlags splits a node state like "MIXED+DRAIN" or "DOWN*" into its
// words, without the trailing markers Slurm adds ('*' not responding, '~'
// powered off, '#' powering up, '%' powering down, '$' maintenance).
func stateFlags(s string) []string {
	var out []string
	for _, f := range strings.Split(s, "+") {
		notResponding := strings.ContainsAny(f, "*")
		f = strings.TrimRight(f, "*~#%$!@^-")
		if f != "" {
			out = append(out, f)
		}
		if notResponding {
			out = append(out, "NOT_RESPONDING")
		}
	}
	return out
}

// GPUCount is the node's GPUs of every type.
func (n NodeInfo) GPUCount() int {
	c := 0
	for _, g := range n.GPUs {
		c += g.Count
	}
	return c
}

// Registration is the node as Corral registers it: GPUs numbered from 0 in
// Gres order, their model the gres type, and the label pool=slurm.
func (n NodeInfo) Registration(version string) api.AgentRegistration {
	reg := api.AgentRegistration{NodeID: n.Name, Hostname: n.Hostname, Address: n.Addr,
		Labels: map[string]string{"pool": "slurm"}, GPUs: []api.AgentGPU{}, Version: version, Tasks: []api.TaskStatus{}}
	if reg.Hostname == "" {
		reg.Hostname = n.Name
	}
	i := 0
	for _, g := range n.GPUs {
		model := g.Type
		if model == "" {
			model = "gpu"
		}
		for k := 0; k < g.Count; k++ {
			reg.GPUs = append(reg.GPUs, api.AgentGPU{Index: i, UUID: fmt.Sprintf("slurm-%s-gpu%d", n.Name, i), Model: model})
			i++
		}
	}
	return reg
}

// ParseNodes reads the output of `scontrol show -o node`: one node a line,
// space-separated Key=Value pairs.
func ParseNodes(out []byte) ([]NodeInfo, error) {
	var nodes []NodeInfo
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		kv := fields(line)
		n := NodeInfo{Name: kv["NodeName"], Addr: kv["NodeAddr"], Hostname: kv["NodeHostName"], State: kv["State"]}
		if n.Name == "" {
			return nil, fmt.Errorf("scontrol show node: a line without NodeName: %.80q", line)
		}
		if p := kv["Partitions"]; p != "" && p != "(null)" {
			n.Partitions = strings.Split(p, ",")
		}
		gpus, err := parseGres(kv["Gres"])
		if err != nil {
			return nil, fmt.Errorf("scontrol show node %s: %w", n.Name, err)
		}
		n.GPUs = gpus
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// parseGres reads the gpu entries of a Gres value such as
// "gpu:a100:4(S:0-1),gpu:v100:2,nic:1" or "gpu:2" or "(null)".
func parseGres(s string) ([]GPUGres, error) {
	var out []GPUGres
	if s == "" || s == "(null)" {
		return nil, nil
	}
	for _, item := range splitGres(s) {
		if i := strings.IndexByte(item, '('); i >= 0 {
			item = item[:i]
		}
		parts := strings.Split(item, ":")
		if parts[0] != "gpu" {
			continue
		}
		g := GPUGres{Count: 1}
		switch len(parts) {
		case 1:
		case 2:
			c, err := strconv.Atoi(parts[1])
			if err != nil {
				g.Type = parts[1] // gpu:TYPE, one of it
			} else {
				g.Count = c
			}
		default:
			g.Type = parts[1]
			c, err := strconv.Atoi(parts[2])
			if err != nil {
				return nil, fmt.Errorf("gres %q: count %q is not a number", item, parts[2])
			}
			g.Count = c
		}
		if g.Count < 0 || g.Count > 1024 {
			return nil, fmt.Errorf("gres %q: count out of range", item)
		}
		out = append(out, g)
	}
	return out, nil
}

// splitGres splits a Gres list at the commas outside parentheses.
func splitGres(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// fields splits a one-line scontrol record into its Key=Value pairs. A
// value runs to the next space; the keys scontrol prints with spaces in
// their values (Reason=, Comment=) come last or are not needed here.
func fields(line string) map[string]string {
	kv := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			if _, dup := kv[k]; !dup {
				kv[k] = v
			}
		}
	}
	return kv
}

// JobInfo is what Corral reads about one Slurm job.
type JobInfo struct {
	ID    string
	State string // JobState / %T: PENDING, RUNNING, COMPLETED, ...
	// ExitCode and Signal are from scontrol's or sacct's ExitCode=code:signal;
	// HasExit says they were there.
	ExitCode, Signal int
	HasExit          bool
}

// ParseSqueue reads `squeue -h -o "%i|%T"` lines.
func ParseSqueue(out []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		id, st, ok := strings.Cut(strings.TrimSpace(line), "|")
		if ok && id != "" {
			m[id] = st
		}
	}
	return m
}

// ParseScontrolJob reads `scontrol show -o job ID`.
func ParseScontrolJob(out []byte) (JobInfo, error) {
	line := strings.TrimSpace(string(out))
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	kv := fields(line)
	j := JobInfo{ID: kv["JobId"], State: kv["JobState"]}
	if j.ID == "" || j.State == "" {
		return JobInfo{}, fmt.Errorf("scontrol show job: no JobId or JobState in %.80q", line)
	}
	j.ExitCode, j.Signal, j.HasExit = parseExit(kv["ExitCode"])
	return j, nil
}

// ParseSacct reads `sacct -X -n -P -j ID -o JobID,State,ExitCode`: the
// allocation's line.
func ParseSacct(out []byte) (JobInfo, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p := strings.Split(strings.TrimSpace(line), "|")
		if len(p) < 3 || p[0] == "" {
			continue
		}
		st, _, _ := strings.Cut(p[1], " ") // "CANCELLED by 0"
		j := JobInfo{ID: p[0], State: st}
		j.ExitCode, j.Signal, j.HasExit = parseExit(p[2])
		return j, nil
	}
	return JobInfo{}, fmt.Errorf("sacct: no job in %.80q", string(out))
}

// parseExit reads "code:signal".
func parseExit(s string) (code, sig int, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	c, err1 := strconv.Atoi(a)
	g, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return c, g, true
}

// ParseJobID reads sbatch --parsable's answer: "ID" or "ID;cluster".
func ParseJobID(out []byte) (string, error) {
	s := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:]) // warnings come before the id
	}
	id, _, _ := strings.Cut(s, ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch: unexpected answer %.80q", s)
	}
	return id, nil
}
