package agents

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/corral-sched/corral/internal/api"
)

// What an agent may say about its node. An agent holds the shared join
// token, not the server's trust: a registration outside these bounds is
// refused (422 naming the field), and a reading outside them is dropped.
const (
	// DefaultMaxGPUs is the default of Config.MaxGPUs
	// (--max-gpus-per-node).
	DefaultMaxGPUs = 64
	// MaxGPUsLimit bounds --max-gpus-per-node: GPU indexes run 0..1023.
	MaxGPUsLimit = maxGPUIndex + 1
	// MaxGPUMemoryMiB bounds one GPU's memory: 16 TiB, some forty times
	// today's largest device.
	MaxGPUMemoryMiB = 16 << 20
	// maxGPUIndex bounds a GPU index (indexes may be sparse when an agent
	// sees only some of a machine's GPUs).
	maxGPUIndex = 1023
	// A temperature outside MinTemperature..MaxTemperature (Celsius) is
	// not a reading of a working GPU.
	MinTemperature = -40
	MaxTemperature = 150
	// maxTaskID bounds a task's job id.
	maxTaskID = 128
)

// validAgentID reports whether s looks like an agent id: an agent makes a
// random one (24 hex digits) and keeps it in its data directory. 16 to 128
// letters, digits, '.', '_' or '-'; at least 16, so that it cannot be
// guessed. (A loop, not a regexp: `{16,128}` compiled at package init
// cost every corral command, client ones included, 2 ms and 1,500
// allocations at start-up.)
func validAgentID(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// checkRegistration refuses a registration whose agent id, GPUs or tasks
// are out of bounds, naming the first bad field (gpus[3].memory_mib).
// maxGPUs is the most GPUs a node may have.
func checkRegistration(reg api.AgentRegistration, maxGPUs int) error {
	if reg.AgentID == "" {
		return api.Invalid("agent_id", "is required: an agent names itself with the id kept in its data directory, so that no other agent can take over its node")
	}
	if !validAgentID(reg.AgentID) {
		return api.Invalid("agent_id", "must be 16 to 128 letters, digits, '.', '_' or '-'")
	}
	if len(reg.GPUs) > maxGPUs {
		return api.Invalid("gpus", "%d GPUs: at most %d per node (the server's --max-gpus-per-node)", len(reg.GPUs), maxGPUs)
	}
	indexes := make(map[int]bool, len(reg.GPUs))
	uuids := make(map[string]bool, len(reg.GPUs))
	for i, g := range reg.GPUs {
		f := func(name string) string { return fmt.Sprintf("gpus[%d].%s", i, name) }
		switch {
		case g.Index < 0 || g.Index > maxGPUIndex:
			return api.Invalid(f("index"), "%d is out of range 0..%d", g.Index, maxGPUIndex)
		case indexes[g.Index]:
			return api.Invalid(f("index"), "GPU index %d is listed twice", g.Index)
		case g.UUID != "" && uuids[g.UUID]:
			return api.Invalid(f("uuid"), "GPU uuid %q is listed twice", g.UUID)
		case g.MemoryMiB < 0 || g.MemoryMiB > MaxGPUMemoryMiB:
			return api.Invalid(f("memory_mib"), "%d MiB is out of range 0..%d (16 TiB)", g.MemoryMiB, MaxGPUMemoryMiB)
		}
		indexes[g.Index] = true
		uuids[g.UUID] = true
	}
	for i, g := range reg.GPUs {
		peers := map[int]bool{}
		for _, p := range g.NVLinkPeers {
			if p == g.Index || !indexes[p] || peers[p] {
				return api.Invalid(fmt.Sprintf("gpus[%d].nvlink_peers", i), "peer %d is not another GPU of this node, or is listed twice", p)
			}
			peers[p] = true
		}
	}
	return checkTasks(reg.Tasks)
}

// checkTasks refuses task reports that no agent would make (badTask),
// naming the first bad field.
func checkTasks(ts []api.TaskStatus) error {
	seen := make(map[taskKey]bool, len(ts))
	for i, t := range ts {
		if field, why := badTask(t, seen); field != "" {
			return api.Invalid(fmt.Sprintf("tasks[%d].%s", i, field), "%s", why)
		}
	}
	return nil
}

// screenTasks keeps the task reports badTask finds nothing wrong with and
// describes the first one it drops ("" when none).
func screenTasks(ts []api.TaskStatus) (kept []api.TaskStatus, dropped int, first string) {
	seen := make(map[taskKey]bool, len(ts))
	kept = ts[:0:0]
	for i, t := range ts {
		if field, why := badTask(t, seen); field != "" {
			if dropped == 0 {
				first = fmt.Sprintf("tasks[%d].%s: %s", i, field, why)
			}
			dropped++
			continue
		}
		kept = append(kept, t)
	}
	return kept, dropped, first
}

// badTask says which field of a task report no agent would send, and why
// ("" when none): an empty or overlong job id, a negative attempt, rank,
// pid or log size, an unknown state, a task already in seen (which it
// joins).
func badTask(t api.TaskStatus, seen map[taskKey]bool) (field, why string) {
	k := taskKey{t.JobID, t.Attempt, t.Rank}
	switch {
	case t.JobID == "" || len(t.JobID) > maxTaskID:
		return "job_id", fmt.Sprintf("must be 1 to %d characters", maxTaskID)
	case t.Attempt < 0:
		return "attempt", "must not be negative"
	case t.Rank < 0:
		return "rank", "must not be negative"
	case t.State != api.TaskRunning && t.State != api.TaskExited && t.State != api.TaskPreparing:
		return "state", fmt.Sprintf("must be %s, %s or %s", api.TaskRunning, api.TaskExited, api.TaskPreparing)
	case t.PID < 0:
		return "pid", "must not be negative"
	case t.LogSize < 0:
		return "log_size", "must not be negative"
	case seen[k]:
		return "job_id", fmt.Sprintf("task %s attempt %d rank %d is listed twice", t.JobID, t.Attempt, t.Rank)
	}
	seen[k] = true
	return "", ""
}

// Bounds on the words an agent's task report carries into a job's events,
const (
	maxTaskError  = 1024
	maxTaskSignal = 32
	// and on a foreign process's user and command name, as shown
	maxForeignUser = 64
	maxForeignName = 256
)

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // not inside a rune
	}
	return s[:n] + "…"
}

// badReading says what is wrong with a reading of a node whose GPUs'
// memory (MiB) by index is mem, or "" when nothing is; seen holds the
// indexes already read in this report.
func badReading(r api.GPUReading, mem map[int]int64, seen map[int]bool) string {
	total, ok := mem[r.Index]
	switch {
	case !ok:
		return fmt.Sprintf("index %d is not a GPU the node registered", r.Index)
	case seen[r.Index]:
		return fmt.Sprintf("GPU %d is read twice", r.Index)
	case r.Utilization < 0 || r.Utilization > 100:
		return fmt.Sprintf("utilization %d is out of range 0..100", r.Utilization)
	case r.MemoryUsedMiB < 0 || r.MemoryUsedMiB > total:
		return fmt.Sprintf("memory_used_mib %d is out of range 0..%d (the GPU's memory)", r.MemoryUsedMiB, total)
	case r.Temperature != nil && (*r.Temperature < MinTemperature || *r.Temperature > MaxTemperature):
		return fmt.Sprintf("temperature %d is out of range %d..%d", *r.Temperature, MinTemperature, MaxTemperature)
	}
	return ""
}

// agentClock turns the times an agent reports into the server's: the
// agent's clock is used only for durations. An agent time t, reported
// when the agent's clock read agent, is server - (agent - t); a time with
// no agent clock to measure it by is server, the time the server hears of
// it.
type agentClock struct {
	server time.Time
	agent  *time.Time // the agent's clock as it sent the report; nil: not sent
}

// at is the server time of agent time t, never after the server's now and
// never before lo (when the task was handed out, or started).
func (c agentClock) at(t *time.Time, lo time.Time) time.Time {
	if t == nil || c.agent == nil {
		return c.server
	}
	ago := max(c.agent.Sub(*t), 0)
	at := c.server.Add(-ago)
	if at.Before(lo) {
		at = lo
	}
	if at.After(c.server) {
		at = c.server
	}
	return at
}

// task returns ts with its start and finish in server time (the start not
// before lo, the finish not before the start), and its error and signal
// clipped to what a job's events may carry.
func (c agentClock) task(ts api.TaskStatus, lo time.Time) api.TaskStatus {
	ts.Error, ts.Signal = clip(ts.Error, maxTaskError), clip(ts.Signal, maxTaskSignal)
	ts.ImageDigest = clip(ts.ImageDigest, maxTaskError)
	start := c.at(ts.StartedAt, lo)
	finish := c.at(ts.FinishedAt, start)
	ts.StartedAt, ts.FinishedAt = &start, &finish
	return ts
}
