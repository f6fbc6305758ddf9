package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Containment: every attempt runs in a cgroup of its
// own, so nothing it forks outlives it, and the device controller keeps it
// off other jobs' GPUs. These tests need a writable cgroup hierarchy (root):
// elsewhere they skip, saying why.

// startContained starts `corral up` (jobs run as the agent's account, so
// the tests do not depend on Unix accounts) and skips the test unless its
// node holds jobs in cgroups.
func startContained(t *testing.T, dataDir string, port int, extra ...string) *server {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containment tests need root: cgroups cannot be written here, and jobs are held by process groups")
	}
	args := append([]string{"up", "--simulate-gpus", "4", "--node-name", "contain-node", "--run-as", "agent"}, extra...)
	s := startControl(t, dataDir, port, nil, args...)
	c := s.cluster()
	if len(c.Nodes) != 1 {
		t.Fatalf("want one node, got %+v", c.Nodes)
	}
	if mode := c.Nodes[0].Containment; !strings.HasPrefix(mode, "cgroup-") {
		t.Skipf("the node's containment is %q, not a cgroup (cgroups not writable here)", mode)
	}
	return s
}

// escapeCmd is a job that starts three processes that leave its process
// group and session and scrub their environment (no CORRAL_* for a
// sweep by environment to find): setsid, a double fork, nohup. Each
// writes its pid to dir/escaped. Then the job runs tail.
func escapeCmd(dir, tail string) string {
	f := shellQuote(filepath.Join(dir, "escaped"))
	daemon := fmt.Sprintf(`/bin/sh -c 'echo $$ >> %s; exec sleep 1000'`, f)
	return fmt.Sprintf(`env -i /usr/bin/setsid %[1]s </dev/null >/dev/null 2>&1 &
(env -i %[1]s </dev/null >/dev/null 2>&1 &)
env -i nohup %[1]s </dev/null >/dev/null 2>&1 &
while [ "$(wc -l < %[2]s 2>/dev/null || echo 0)" -lt 3 ]; do sleep 0.05; done
%[3]s`, daemon, f, tail)
}

// waitEscaped waits for the three escapees of escapeCmd and checks they
// run.
func waitEscaped(t *testing.T, dir string) []int {
	t.Helper()
	path := filepath.Join(dir, "escaped")
	waitFor(t, 20*time.Second, func() string { return "the job's escapees to start" }, func() bool {
		b, _ := os.ReadFile(path)
		return len(strings.Fields(string(b))) >= 3
	})
	pids := readPIDs(t, path)
	for _, p := range pids {
		if processGone(p) {
			t.Fatalf("escapee %d is gone before the job ended: the test proves nothing", p)
		}
	}
	return pids
}

// waitGone waits until every pid has ended.
func waitGone(t *testing.T, pids []int, after string) {
	t.Helper()
	waitGoneWithin(t, 10*time.Second, pids, after)
}

func waitGoneWithin(t *testing.T, timeout time.Duration, pids []int, after string) {
	t.Helper()
	waitFor(t, timeout, func() string {
		var alive []string
		for _, p := range pids {
			if !processGone(p) {
				alive = append(alive, strconv.Itoa(p))
			}
		}
		return fmt.Sprintf("the job's escaped processes (%s alive) to die after %s", strings.Join(alive, " "), after)
	}, func() bool {
		for _, p := range pids {
			if !processGone(p) {
				return false
			}
		}
		return true
	})
}

// TestSecurityContainEscapeesDie: what a job forks out of its process
// group and session (setsid, double fork, nohup, with its environment
// scrubbed) dies with the job, however the job ends.
func TestSecurityContainEscapeesDie(t *testing.T) {
	s := startContained(t, t.TempDir(), freePort(t))
	for _, tc := range []struct {
		name   string
		tail   string
		extra  map[string]any
		end    func(t *testing.T, s *server, id string)
		state  api.State
		reason string
	}{
		// Each job goes on to its tail once the test has seen its
		// escapees run (the file release): exiting at once, it could take
		// them down before the test looked, and prove nothing.
		{name: "normal exit", tail: "exit 0", state: api.StateCompleted, reason: api.ReasonExited},
		{name: "cancel", tail: "exec sleep 1000", state: api.StateCanceled, reason: api.ReasonCanceled,
			end: func(t *testing.T, s *server, id string) {
				if r := s.do("DELETE", "/queue/"+id+"?grace=1s", nil, nil); r.Status != http.StatusAccepted {
					t.Fatalf("cancel: %s", r)
				}
			}},
		{name: "time limit", tail: "exec sleep 1000", extra: map[string]any{"time_limit": "2s"},
			state: api.StateFailed, reason: api.ReasonTimeLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.on(t)
			dir := t.TempDir()
			release := filepath.Join(dir, "release")
			tail := "while [ ! -e " + shellQuote(release) + " ]; do sleep 0.05; done\n" + tc.tail
			req := map[string]any{"command": escapeCmd(dir, tail), "gpu_count": 1}
			for k, v := range tc.extra {
				req[k] = v
			}
			j := s.submit(req)
			pids := waitEscaped(t, dir)
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.end != nil {
				tc.end(t, s, j.ID)
			}
			got := s.waitTerminal(j.ID, 30*time.Second)
			if got.State != tc.state || got.Reason != tc.reason {
				t.Errorf("ended %s (%s: %s); want %s (%s)", got.State, got.Reason, got.Message, tc.state, tc.reason)
			}
			waitGone(t, pids, tc.name)
		})
	}
}

// TestSecurityContainKill9Restart: after kill -9 of `corral up`, a job's
// escaped daemon (environment scrubbed) still runs in the job's cgroup
// beside the job, which runs on; the restarted server adopts the job, and
// once it is canceled its escapee is killed with it.
func TestSecurityContainKill9Restart(t *testing.T) {
	dataDir, port := t.TempDir(), freePort(t)
	s := startContained(t, dataDir, port)
	dir := t.TempDir()
	j := s.submit(map[string]any{"command": escapeCmd(dir, "exec sleep 1000"), "gpu_count": 1, "max_retries": 1})
	pids := waitEscaped(t, dir)
	s.kill9()
	alive := 0
	for _, p := range pids {
		if !processGone(p) {
			alive++
		}
	}
	if alive == 0 {
		t.Fatal("no escapee outlived kill -9 of corral up: the test proves nothing")
	}
	s2 := startContained(t, dataDir, port)
	if got := s2.job(j.ID); got.State != api.StateRunning || got.RetryCount != 0 {
		t.Errorf("after the restart the job is %s (%s) after %d retries, want running (adopted, no retry)", got.State, got.Message, got.RetryCount)
	}
	if r := s2.do("DELETE", "/queue/"+j.ID+"?grace=1s", nil, nil); r.Status != 200 && r.Status != 202 {
		t.Fatalf("cancel: %s", r)
	}
	waitGone(t, pids, "the adopted job's cancel")
}

// TestSecurityContainDevices makes fake GPU device nodes (195:0-3) and
// proves that a job can open only its own: another GPU's node gives EPERM
// (the device controller), its own ENXIO (a fake node has no driver),
// while /dev/null and friends work as ever.
func TestSecurityContainDevices(t *testing.T) {
	s := startContained(t, t.TempDir(), freePort(t))
	devDir := t.TempDir()
	for m := range 4 {
		if err := syscall.Mknod(filepath.Join(devDir, fmt.Sprintf("nvidia%d", m)), syscall.S_IFCHR|0o666, 195<<8|m); err != nil {
			t.Skipf("mknod of a fake GPU device: %v", err)
		}
	}
	d := shellQuote(devDir)
	cmd := fmt.Sprintf(`echo "gpus=$CORRAL_GPUS"
for n in 0 1 2 3; do cat %s/nvidia$n 2>&1 | sed "s|^|nvidia$n: |"; done
head -c 4 /dev/urandom | wc -c; echo x > /dev/null && echo null-ok; head -c 3 /dev/zero | wc -c`, d)
	j := s.submit(map[string]any{"command": cmd, "gpu_count": 2})
	got := s.waitTerminal(j.ID, 30*time.Second)
	out := s.logs(j.ID)
	if got.State != api.StateCompleted {
		t.Fatalf("job ended %s (%s); log:\n%s", got.State, got.Message, out)
	}
	own := map[int]bool{}
	for _, a := range got.Allocation {
		own[a.GPUID] = true
	}
	for m := range 4 {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, fmt.Sprintf("nvidia%d: ", m)) {
				line = l
			}
		}
		// An allowed fake node fails to open too, but not with EPERM
		// (ENXIO without an NVIDIA driver, EINVAL or ENODEV with one).
		if denied := strings.Contains(line, "Operation not permitted"); line == "" || denied == own[m] {
			t.Errorf("GPU %d (own: %v): denied %v, want %v (%q); log:\n%s", m, own[m], denied, !own[m], line, out)
		}
	}
	if !strings.Contains(out, "null-ok") || !strings.Contains(out, "4\n") {
		t.Errorf("ordinary devices do not work; log:\n%s", out)
	}
}

// TestSecurityContainLimits: a job past its --mem fails out_of_memory;
// its limits (its own, or the node's per-GPU defaults) are its cgroup's;
// the node shows its containment in the JSON and in `corral nodes`.
func TestSecurityContainLimits(t *testing.T) {
	s := startContained(t, t.TempDir(), freePort(t), "--default-mem-per-gpu", "1G", "--default-cpus-per-gpu", "1.5")
	mode := s.cluster().Nodes[0].Containment
	out, _, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "nodes")
	if code != 0 || !strings.Contains(out, "CONTAINMENT") || !strings.Contains(out, mode) {
		t.Errorf("corral nodes does not show the containment %q:\n%s", mode, out)
	}

	hog := s.submit(map[string]any{"command": `x=$(head -c 400000000 /dev/zero | tr '\0' a); echo ${#x}`, "gpu_count": 1, "mem_mib": 64})
	got := s.waitTerminal(hog.ID, 60*time.Second)
	if got.State != api.StateFailed || got.Reason != api.ReasonOutOfMemory {
		t.Errorf("memory hog ended %s (%s: %s); want failed (out_of_memory)", got.State, got.Reason, got.Message)
	}

	for _, tc := range []struct {
		name      string
		req       map[string]any
		mem, quot string
	}{
		{"own limits", map[string]any{"gpu_count": 1, "mem_mib": 2048, "cpus": 0.5}, "2147483648", "50000"},
		{"per-GPU defaults", map[string]any{"gpu_count": 2}, "2147483648", "300000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.on(t)
			switch mode {
			case "cgroup-v1":
				tc.req["command"] = `m=$(grep ':memory:' /proc/self/cgroup | cut -d: -f3); c=$(grep -E ':cpu(,cpuacct)?:' /proc/self/cgroup | cut -d: -f3)
echo "mem=$(cat /sys/fs/cgroup/memory$m/memory.limit_in_bytes) quota=$(cat /sys/fs/cgroup/cpu$c/cpu.cfs_quota_us)"`
			case "cgroup-v2":
				tc.req["command"] = `p=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "mem=$(cat /sys/fs/cgroup$p/memory.max) quota=$(cut -d' ' -f1 /sys/fs/cgroup$p/cpu.max)"`
			default:
				t.Skipf("reads cgroup files; the node is %s", mode)
			}
			j := s.submit(tc.req)
			s.waitState(j.ID, api.StateCompleted, 30*time.Second)
			want := fmt.Sprintf("mem=%s quota=%s", tc.mem, tc.quot)
			if log := s.logs(j.ID); !strings.Contains(log, want) {
				t.Errorf("want %q in the log:\n%s", want, log)
			}
		})
	}

	before := len(s.jobs())
	for _, bad := range []struct {
		field string
		value any
	}{
		{"mem_mib", -5}, {"mem_mib", 1.5}, {"mem_mib", 1e20}, {"mem_mib", "64G"}, {"mem_mib", 1 << 40},
		{"cpus", -1}, {"cpus", 1e9}, {"cpus", "x"}, {"cpus", 0.001},
	} {
		r := s.do("POST", "/queue/submit", map[string]any{"command": "true", "gpu_count": 0, bad.field: bad.value}, nil)
		if r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != bad.field {
			t.Errorf("%s %v: want 422 naming %s, got %s", bad.field, bad.value, bad.field, r)
		}
	}
	if after := len(s.jobs()); after != before {
		t.Errorf("refused submissions made jobs: %d -> %d", before, after)
	}
}

// TestSecurityContainStandaloneAgent: under `corral agent` (jobs run under
// shims) escaped daemons die on cancel, and after kill -9 of the agent and
// a restart with another data directory (which cannot adopt the job).
func TestSecurityContainStandaloneAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("containment tests need root: cgroups cannot be written here")
	}
	s := startCluster(t)
	a := startAgent(t, s, "n1", 2, "--run-as", "agent")
	if mode := s.cluster().Nodes[0].Containment; !strings.HasPrefix(mode, "cgroup-") {
		t.Skipf("the node's containment is %q, not a cgroup (cgroups not writable here)", mode)
	}

	dir := t.TempDir()
	j := s.submit(map[string]any{"command": escapeCmd(dir, "exec sleep 1000"), "gpu_count": 1})
	pids := waitEscaped(t, dir)
	if r := s.do("DELETE", "/queue/"+j.ID+"?grace=1s", nil, nil); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %s", r)
	}
	s.waitState(j.ID, api.StateCanceled, 20*time.Second)
	waitGone(t, pids, "the cancel")

	dir = t.TempDir()
	j = s.submit(map[string]any{"command": escapeCmd(dir, "exec sleep 1000"), "gpu_count": 1, "max_retries": 1})
	pids = waitEscaped(t, dir)
	a.kill9()
	a.dataDir = t.TempDir()
	for i, arg := range a.args {
		if arg == "--data-dir" {
			a.args[i+1] = a.dataDir
		}
	}
	a.start()
	waitGoneWithin(t, clusterTTL+20*time.Second, pids, "kill -9 of the agent and a restart elsewhere")
}

// TestSecurityContainPreemption: a preempted job's escaped daemons die
// with it, before its GPUs go to the job that preempted it.
func TestSecurityContainPreemption(t *testing.T) {
	s := startContained(t, t.TempDir(), freePort(t))
	s.setPolicies(map[string]any{"policy": "priority", "preemption": true, "min_run_time": 0, "preempt_grace": "1s"})
	dir := t.TempDir()
	low := s.submit(map[string]any{"command": escapeCmd(dir, "exec sleep 1000"), "gpu_count": 4, "priority": "low", "max_retries": 1})
	pids := waitEscaped(t, dir)
	high := s.submit(map[string]any{"command": "true", "gpu_count": 4, "priority": "critical"})
	s.waitJob(low.ID, 30*time.Second, "to be preempted", func(j api.Job) bool { return j.Preemptions == 1 })
	waitGone(t, pids, "the preemption")
	s.waitState(high.ID, api.StateCompleted, 30*time.Second)
}

// TestSecurityContainFallback: an agent that holds jobs by process groups
// (--containment process-group, as where cgroups cannot be written) says
// why at start, and its node shows process-group in the JSON and the CLI.
func TestSecurityContainFallback(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "1", "--node-name", "pg-node", "--containment", "process-group")
	if c := s.cluster(); len(c.Nodes) != 1 || c.Nodes[0].Containment != "process-group" {
		t.Fatalf("nodes %+v: want one, process-group", c.Nodes)
	}
	if out := s.out.String(); !strings.Contains(out, "process groups only") || !strings.Contains(out, "why=") {
		t.Errorf("no start-up line says why jobs are held by process groups:\n%s", out)
	}
	out, _, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "nodes")
	if code != 0 || !strings.Contains(out, "process-group") {
		t.Errorf("corral nodes does not show process-group:\n%s", out)
	}
	j := s.submit(map[string]any{"command": "exit 3", "gpu_count": 1})
	if got := s.waitTerminal(j.ID, 20*time.Second); got.State != api.StateFailed || got.Reason != api.ReasonExitCode {
		t.Errorf("a job under process groups ended %s (%s)", got.State, got.Reason)
	}
}

// TestSecurityContainForkBomb: a job that forks without end is held to
// --max-pids-per-job: past the cap its forks fail (the shell gives up),
// nothing it forked survives, and the node goes on running the next job.
func TestSecurityContainForkBomb(t *testing.T) {
	s := startContained(t, t.TempDir(), freePort(t), "--max-pids-per-job", "64")
	// Forks until a fork fails (at most 2,000 tries); its children would
	// sleep ten minutes. The duration is this test's own, so that other
	// processes on the machine sleeping 600 s are not counted.
	sleep := fmt.Sprintf("sleep 600.%06d", time.Now().UnixNano()%1000000)
	bomb := s.submit(map[string]any{"gpu_count": 1, "command": `i=0; while [ $i -lt 2000 ]; do ` + sleep + ` & i=$((i+1)); done; echo all-forked`})
	got := s.waitTerminal(bomb.ID, 60*time.Second)
	if out := s.logs(bomb.ID); got.State != api.StateFailed || !strings.Contains(strings.ToLower(out), "fork") || strings.Contains(out, "all-forked") {
		t.Errorf("the bomb ended %s (%s); log %q; want failed, its shell unable to fork", got.State, got.Message, truncate(out, 300))
	}
	waitFor(t, 10*time.Second, func() string { return "the bomb's children to be gone" }, func() bool { return countProcs(sleep) == 0 })
	next := s.submit(map[string]any{"gpu_count": 1, "command": `sh -c 'echo child-ok'`})
	if j := s.waitTerminal(next.ID, 60*time.Second); j.State != api.StateCompleted || !strings.Contains(s.logs(next.ID), "child-ok") {
		t.Errorf("the next job ended %s (%s): %q", j.State, j.Message, s.logs(next.ID))
	}
}

// countProcs counts the live processes whose command line is cmdline.
func countProcs(cmdline string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			n++
		}
	}
	return n
}

// TestSecurityContainNodePids: --max-pids-per-node holds all of a node's
// jobs together (once, five zero-GPU jobs, each within
// --max-pids-per-job, filled the node's pid space). With no cap per job,
// a first job forks 80 processes and keeps them; a second that tries 80
// more has its forks fail at the node's cap of 100 (its forking shell
// gives up; the job goes on), so no more than 100 tasks of the jobs live
// at once, and the machine outside them still forks.
func TestSecurityContainNodePids(t *testing.T) {
	const nodeCap, each = 100, 80
	s := startContained(t, t.TempDir(), freePort(t), "--max-pids-per-job", "0", "--max-pids-per-node", strconv.Itoa(nodeCap))
	stamp := time.Now().UnixNano() % 1000000
	sleepA, sleepB := fmt.Sprintf("sleep 600.%06d", stamp), fmt.Sprintf("sleep 601.%06d", stamp)
	// The forks run in an inner shell: when one fails that shell exits,
	// the job's own shell says so and stays (exec: no fork needed).
	forks := func(sleep string) string {
		return fmt.Sprintf(`sh -c 'i=0; while [ $i -lt %d ]; do %s & i=$((i+1)); done; echo forked-all'; echo "loop-ended $?"; exec sleep 1000`, each, sleep)
	}
	var jobs []api.Job
	for _, sleep := range []string{sleepA, sleepB} {
		j := s.submit(map[string]any{"gpu_count": 0, "command": forks(sleep)})
		jobs = append(jobs, j)
		waitFor(t, 60*time.Second, func() string { return "the job's fork loop to end: " + truncate(s.logs(j.ID), 300) },
			func() bool { return strings.Contains(s.logs(j.ID), "loop-ended") })
	}
	nA, nB := countProcs(sleepA), countProcs(sleepB)
	logA, logB := s.logs(jobs[0].ID), s.logs(jobs[1].ID)
	t.Logf("sleeps alive: first job %d, second %d; second's log %q", nA, nB, truncate(logB, 200))
	if nA != each || !strings.Contains(logA, "forked-all") {
		t.Errorf("the first job has %d of its %d sleeps (log %q)", nA, each, truncate(logA, 300))
	}
	if strings.Contains(logB, "forked-all") || !strings.Contains(strings.ToLower(logB), "fork") || nB == 0 || nA+nB > nodeCap {
		t.Errorf("the second job's forks: %d sleeps beside the first's %d, node cap %d; log %q; want its forks to fail at the cap", nB, nA, nodeCap, truncate(logB, 300))
	}
	if got := nodePidsMax(t, sleepA); got != strconv.Itoa(nodeCap) {
		t.Errorf("the node's parent cgroup has pids.max %q, want %d", got, nodeCap)
	}
	// The machine outside the node's jobs still forks.
	if out, err := exec.Command("/bin/sh", "-c", "sleep 0 & wait; echo forked").CombinedOutput(); err != nil || !strings.Contains(string(out), "forked") {
		t.Errorf("a fork outside the jobs failed: %v %q", err, out)
	}

	for _, j := range jobs {
		if r := s.do("DELETE", "/queue/"+j.ID+"?grace=1s", nil, nil); r.Status != http.StatusAccepted {
			t.Fatalf("cancel: %s", r)
		}
		s.waitTerminal(j.ID, 30*time.Second)
	}
	waitFor(t, 10*time.Second, func() string { return "the jobs' sleeps to be gone" },
		func() bool { return countProcs(sleepA)+countProcs(sleepB) == 0 })
	// (No job after them here: on a machine whose init does not reap,
	// the processes a kill orphans stay zombies, charged to the node's
	// cap, until something reaps them.)
}

// nodePidsMax is the pids.max of the parent cgroup of the cgroup of the
// process whose command line is cmdline (a job's: its node's parent).
func nodePidsMax(t *testing.T, cmdline string) string {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") != cmdline {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(cg), "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 {
				continue
			}
			var dir string
			switch {
			case f[1] == "pids":
				dir = filepath.Join("/sys/fs/cgroup/pids", f[2])
			case f[0] == "0" && f[1] == "" && !strings.Contains(string(cg), ":pids:"):
				dir = filepath.Join("/sys/fs/cgroup", f[2])
			default:
				continue
			}
			v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "pids.max"))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(v))
		}
		t.Fatalf("no pids cgroup for %q in %q", cmdline, cg)
	}
	t.Fatalf("no process %q", cmdline)
	return ""
}

// TestSecurityContainClosedDevices: through `corral up`, a job's cgroup
// opens only the closed list (docs/security.md): fake nodes of /dev/mem,
// a disk, /dev/fuse, another driver's device and a MIG capability (any
// nvidia-caps minor: this node's jobs hold none) give EPERM, while null,
// zero, full, urandom and ptmx work.
func TestSecurityContainClosedDevices(t *testing.T) {
	s := startContained(t, t.TempDir(), freePort(t))
	devDir := t.TempDir()
	nodes := []struct {
		name        string
		kind        uint32
		major, minr int
		open        bool
	}{
		{"null", syscall.S_IFCHR, 1, 3, true}, {"zero", syscall.S_IFCHR, 1, 5, true}, {"full", syscall.S_IFCHR, 1, 7, true},
		{"urandom", syscall.S_IFCHR, 1, 9, true}, {"ptmx", syscall.S_IFCHR, 5, 2, true},
		{"mem", syscall.S_IFCHR, 1, 1, false}, {"fuse", syscall.S_IFCHR, 10, 229, false},
		{"loop0", syscall.S_IFBLK, 7, 0, false}, {"cap-config", syscall.S_IFCHR, 509, 1, false},
		{"input", syscall.S_IFCHR, 13, 64, false},
	}
	for _, n := range nodes {
		if err := syscall.Mknod(filepath.Join(devDir, n.name), n.kind|0o666, n.major<<8|n.minr); err != nil {
			t.Skipf("mknod of a fake device: %v", err)
		}
	}
	cmd := fmt.Sprintf(`for f in %s/*; do err=$( (: <>"$f") 2>&1 ); case "$err" in *"not permitted"*) echo "${f##*/} EPERM";; *) echo "${f##*/} ok";; esac; done`, shellQuote(devDir))
	j := s.submit(map[string]any{"command": cmd, "gpu_count": 1})
	got := s.waitTerminal(j.ID, 30*time.Second)
	out := s.logs(j.ID)
	if got.State != api.StateCompleted {
		t.Fatalf("job ended %s (%s); log:\n%s", got.State, got.Message, out)
	}
	for _, n := range nodes {
		want := n.name + " EPERM"
		if n.open {
			want = n.name + " ok"
		}
		if !strings.Contains(out, want+"\n") {
			t.Errorf("%s (%d:%d): want %q; log:\n%s", n.name, n.major, n.minr, want, out)
		}
	}
}
