package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The host-side holes an audit found: runaway logs (defect 6), secrets
// readable by every local account, and jobs run as root (defect 4).

// floodCmd writes far more than any test cap (8 MiB of "y"), then a line
// that must not reach the log, and exits 0: a job whose output is capped
// goes on to its end.
const floodCmd = "yes | head -c 8388608; echo after-the-flood; exit 0"

// TestSecurityLogFloodCapped: a flood of output is cut at --max-log-size
// behind one marker line, and the job completes: on the in-process agent
// of corral up, and on a standalone agent (through its shim, shipped to
// the server, which caps what it stores too).
func TestSecurityLogFloodCapped(t *testing.T) {
	const marker = "corral: the "
	check := func(t *testing.T, s *server, id string, capBytes int) {
		t.Helper()
		j := s.waitTerminal(id, 60*time.Second)
		if j.State != api.StateCompleted {
			t.Fatalf("flooding job ended %s (%s: %s); want completed", j.State, j.Reason, j.Message)
		}
		out := s.logs(id)
		if n := strings.Count(out, marker); n != 1 {
			t.Errorf("log has %d marker lines, want 1", n)
		}
		body, _, _ := strings.Cut(out, "\n"+marker)
		if len(body) != capBytes || strings.Contains(out, "after-the-flood") {
			t.Errorf("log keeps %d bytes of output (after-the-flood in it: %v); want exactly the cap, %d", len(body), strings.Contains(out, "after-the-flood"), capBytes)
		}
		if len(out) > capBytes+500 {
			t.Errorf("log is %d bytes, past the cap %d and a marker", len(out), capBytes)
		}
	}
	t.Run("corral up", func(t *testing.T) {
		s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "1", "--node-name", "flood", "--max-log-size", "64KiB")
		j := s.submit(map[string]any{"gpu_count": 0, "command": floodCmd})
		check(t, s, j.ID, 64<<10)
		// The file on disk is capped too.
		fi, err := os.Stat(filepath.Join(s.DataDir, "logs", j.ID, "0.log"))
		if err != nil || fi.Size() > 64<<10+500 {
			t.Errorf("log file: %v, %v bytes", err, fi)
		}
	})
	for _, tc := range []struct {
		name        string
		server, agt string
		want        int
	}{
		{"agent caps", "1MiB", "64KiB", 64 << 10},
		{"server caps what it stores", "32KiB", "1MiB", 32 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startControl(t, t.TempDir(), freePort(t), []string{"CORRAL_JOIN_TOKEN=" + joinToken}, "server",
				"--node-ttl", clusterTTL.String(), "--heartbeat", "300ms", "--max-log-size", tc.server)
			startAgent(t, s, "flood-agent", 1, "--max-log-size", tc.agt)
			// One GPU: the server takes shipped output only from a node
			// that holds the job, and a job without GPUs holds none.
			j := s.submit(map[string]any{"gpu_count": 1, "command": floodCmd})
			check(t, s, j.ID, tc.want)
		})
	}
}

// TestSecurityDataDirPrivate: the data dir is 0700 and the database, its
// WAL and the job logs are 0600 after start, including files an older
// corral left 0644 in a 0755 tree; the same for an agent's data dir.
func TestSecurityDataDirPrivate(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	s := startControl(t, dir, port, nil, "up", "--simulate-gpus", "1", "--node-name", "private")
	j := s.submit(map[string]any{"gpu_count": 0, "command": "echo secret-output", "env": map[string]string{"SECRET": "hunter2"}})
	s.waitState(j.ID, api.StateCompleted, 30*time.Second)
	log := filepath.Join(dir, "logs", j.ID, "0.log")
	want := map[string]fs.FileMode{dir: 0o700, filepath.Join(dir, "corral.db"): 0o600, filepath.Join(dir, "corral.db-wal"): 0o600,
		filepath.Join(dir, "corral.db-shm"): 0o600, filepath.Join(dir, "logs"): 0o700, filepath.Dir(log): 0o700, log: 0o600}
	checkModes(t, "fresh start", want)

	// As an older corral left them: open to every account.
	s.stop()
	for p := range want {
		mode := fs.FileMode(0o644)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			mode = 0o755
		}
		os.Chmod(p, mode)
	}
	startControl(t, dir, port, nil, "up", "--simulate-gpus", "1", "--node-name", "private")
	checkModes(t, "restart over 0644 files", want)

	// A standalone agent's data dir: task state (the job's env) and logs.
	c := startCluster(t)
	a := startAgent(t, c, "private-agent", 1)
	j = c.submit(map[string]any{"gpu_count": 1, "command": "echo started; sleep 30", "env": map[string]string{"SECRET": "hunter2"}})
	waitFor(t, 30*time.Second, func() string { return "the job's first output to be shipped" }, func() bool {
		return strings.Contains(c.logs(j.ID), "started")
	})
	tasks := filepath.Join(a.dataDir, "state", "tasks")
	checkModes(t, "agent", map[string]fs.FileMode{a.dataDir: 0o700, filepath.Join(a.dataDir, "logs"): 0o700,
		filepath.Join(a.dataDir, "logs", j.ID, "0.log"): 0o600, tasks: 0o700, filepath.Join(tasks, j.ID+".0.0.task"): 0o600})
}

func checkModes(t *testing.T, when string, want map[string]fs.FileMode) {
	t.Helper()
	for p, m := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", when, err)
			continue
		}
		if fi.Mode().Perm() != m {
			t.Errorf("%s: %s is %v, want %v", when, p, fi.Mode().Perm(), m)
		}
	}
}

// TestSecurityRunAsNeverRoot: a root agent in the default mode never runs
// a job as root. A job whose owner has no Unix account fails start_failed
// saying what to configure; with --run-as-fallback nobody it runs as
// nobody; a job of root is refused either way. corral up says at start
// what to pass when its own user's jobs would fail. Runs only as root.
func TestSecurityRunAsNeverRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root agent switches users")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody on this machine")
	}
	if _, err := user.Lookup("admin"); err == nil {
		t.Skip("this machine has an account named admin, the test's job owner")
	}
	run := func(s *server, owner string) (api.Job, string) {
		t.Helper()
		j := s.submit(map[string]any{"user": owner, "gpu_count": 0, "workdir": "/", "command": "echo uid=$(id -u)"})
		j = s.waitTerminal(j.ID, 30*time.Second)
		return j, s.logs(j.ID)
	}

	// The default: no CORRAL_RUN_AS, no --run-as.
	s := startControl(t, t.TempDir(), freePort(t), []string{"CORRAL_RUN_AS="}, "up", "--simulate-gpus", "1", "--node-name", "runas")
	waitFor(t, 10*time.Second, func() string { return "corral up's banner" }, func() bool { return strings.Contains(s.out.String(), "dashboard:") })
	if out := s.out.String(); !strings.Contains(out, "--run-as agent") || !strings.Contains(out, "--run-as-fallback") {
		t.Errorf("corral up as root does not say what to pass for its admin user's jobs; output:\n%s", out)
	}
	j, out := run(s, "no-such-account-here")
	if j.State != api.StateFailed || j.Reason != api.ReasonStartFailed || strings.Contains(out, "uid=") {
		t.Errorf("job of an owner without an account: %s %s, output %q; want failed start_failed, never run", j.State, j.Reason, out)
	}
	for _, what := range []string{"create the account", "--run-as-fallback", "--run-as agent"} {
		if !strings.Contains(j.Message, what) {
			t.Errorf("start_failed message %q does not say %q", j.Message, what)
		}
	}
	if j, _ := run(s, "root"); j.State != api.StateFailed || j.Reason != api.ReasonStartFailed || !strings.Contains(j.Message, "root") {
		t.Errorf("root's job: %s %s %q; want failed start_failed", j.State, j.Reason, j.Message)
	}

	// The opt-in: owners without an account run as nobody; root still not.
	s = startControl(t, t.TempDir(), freePort(t), []string{"CORRAL_RUN_AS="}, "up", "--simulate-gpus", "1", "--node-name", "runas-fb",
		"--run-as-fallback", "nobody")
	if j, out := run(s, "no-such-account-here"); j.State != api.StateCompleted || strings.TrimSpace(out) != "uid="+nobody.Uid {
		t.Errorf("with --run-as-fallback nobody: %s %q, output %q; want completed as uid %s", j.State, j.Message, out, nobody.Uid)
	}
	if j, _ := run(s, "root"); j.State != api.StateFailed || j.Reason != api.ReasonStartFailed {
		t.Errorf("with --run-as-fallback nobody, root's job: %s %s %q; want failed start_failed", j.State, j.Reason, j.Message)
	}

	// A fallback of root is refused at start.
	if _, errOut, code := runCLI(t, nil, "up", "--simulate-gpus", "1", "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--run-as-fallback", "root"); code == 0 || !strings.Contains(errOut, "root") {
		t.Errorf("--run-as-fallback root: exit %d, %q; want refused", code, errOut)
	}
}

// TestSecurityMinFreeDisk: an agent whose log disk has less free than
// --min-free-disk takes no new jobs, and the waiting job says why; the
// node shows it in gpu-status.
func TestSecurityMinFreeDisk(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "full-disk",
		"--min-free-disk", "100%", "--heartbeat", "300ms")
	var n api.Node
	waitFor(t, 20*time.Second, func() string { return fmt.Sprintf("node to report a full disk (%+v)", n) }, func() bool {
		n = s.cluster().Nodes[0]
		return n.DiskFull != ""
	})
	j := s.submit(map[string]any{"gpu_count": 1, "command": "true"})
	j = s.waitJob(j.ID, 20*time.Second, "to wait for the disk", func(j api.Job) bool { return j.PendingReason == "node_disk_full" })
	if j.State != api.StateQueued || !strings.Contains(j.PendingMessage, "full-disk") || !strings.Contains(j.PendingMessage, "--min-free-disk 100%") {
		t.Errorf("job %s, pending %s %q; want queued, naming the node and --min-free-disk", j.State, j.PendingReason, j.PendingMessage)
	}
	if out, _, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "nodes"); code != 0 || !strings.Contains(out, "node full-disk takes no new jobs: its log disk") {
		t.Errorf("corral nodes (exit %d) does not say the disk is full:\n%s", code, out)
	}
}

// TestSecurityFullDiskServerSurvives: with the data dir on a small tmpfs
// filled to the last byte, the server keeps running: a submit the store
// cannot write answers 503 store_unavailable and changes nothing, reads
// go on, and once there is room again submits succeed and every job
// acknowledged before is still there. Runs only as root (it mounts).
func TestSecurityFullDiskServerSurvives(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dir, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	s := startControl(t, dir, freePort(t), nil, "up", "--simulate-gpus", "1", "--node-name", "full", "--min-free-disk", "0")
	first := s.submit(map[string]any{"gpu_count": 0, "command": "echo before-the-flood"})
	s.waitState(first.ID, api.StateCompleted, 30*time.Second)
	// A job that writes while the disk is full, and again once it has room.
	ctl := t.TempDir()
	writer := s.submit(map[string]any{"gpu_count": 0, "command": fmt.Sprintf(
		"echo before; until [ -e %[1]s/full ]; do sleep 0.05; done; head -c 65536 /dev/zero | tr '\\0' y; echo; touch %[1]s/wrote; "+
			"until [ -e %[1]s/room ]; do sleep 0.05; done; echo after-room", ctl)})
	s.waitState(writer.ID, api.StateRunning, 30*time.Second)
	// Its first line is in the log before the disk fills (the copier
	// writes it a moment after the job echoes it).
	waitFor(t, 30*time.Second, func() string { return "the writer's first line in its log" }, func() bool { return s.logs(writer.ID) == "before\n" })

	// Fill the disk.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	os.WriteFile(filepath.Join(ctl, "full"), nil, 0o644)
	waitFor(t, 30*time.Second, func() string { return "the writer job to write on the full disk" }, func() bool { return fileExists(filepath.Join(ctl, "wrote")) })

	// Submit with a large env until the store cannot write.
	big := strings.Repeat("x", 32<<10)
	var acked []string
	refused := false
	for i := 0; i < 400 && !refused; i++ {
		r := s.do("POST", "/queue/submit", map[string]any{"gpu_count": 0, "command": "true", "env": map[string]string{"PAD": big}}, nil)
		switch r.Status {
		case http.StatusCreated:
			var j api.Job
			json.Unmarshal(r.Body, &j)
			acked = append(acked, j.ID)
		case http.StatusServiceUnavailable:
			if e := errorBody(t, r); e.Code != "store_unavailable" {
				t.Fatalf("503 with code %q, want store_unavailable", e.Code)
			}
			refused = true
		default:
			t.Fatalf("submit on a full disk: %s", r)
		}
	}
	if !refused {
		t.Fatalf("400 submits on a full disk were all accepted")
	}
	// The server lives and reads go on; changes are refused at once.
	if s.exited() || !s.healthy() {
		t.Fatalf("the server died on a full disk; output:\n%s", s.out.String())
	}
	if j := s.job(first.ID); j.State != api.StateCompleted {
		t.Errorf("earlier job reads as %s", j.State)
	}
	began := time.Now()
	if r := s.do("POST", "/queue/submit", map[string]any{"gpu_count": 0, "command": "true"}, nil); r.Status != http.StatusServiceUnavailable {
		t.Errorf("submit while the store is down: %s; want 503", r)
	} else if d := time.Since(began); d > 2*time.Second {
		t.Errorf("a refused submit took %s", d)
	}

	// Room again: the server writes again, and nothing acknowledged is lost.
	os.Remove(filler)
	os.WriteFile(filepath.Join(ctl, "room"), nil, 0o644)
	var j api.Job
	waitFor(t, 30*time.Second, func() string { return "a submit to succeed once the disk has room" }, func() bool {
		r := s.do("POST", "/queue/submit", map[string]any{"gpu_count": 0, "command": "echo after-the-flood"}, nil)
		if r.Status == http.StatusCreated {
			json.Unmarshal(r.Body, &j)
		}
		return r.Status == http.StatusCreated
	})
	s.waitState(j.ID, api.StateCompleted, 30*time.Second)
	if out := s.logs(j.ID); !strings.Contains(out, "after-the-flood") {
		t.Errorf("log after the disk had room: %q", out)
	}
	// The writer's log lost its output on the full disk, and says so.
	s.waitState(writer.ID, api.StateCompleted, 30*time.Second)
	if out := s.logs(writer.ID); !strings.HasPrefix(out, "before\n") || !strings.Contains(out, "bytes of output were lost") || !strings.HasSuffix(out, "after-room\n") {
		t.Errorf("the writer's log: %q; want before, a line saying what was lost, after-room", truncate(out, 400))
	}
	for _, id := range acked {
		s.waitState(id, api.StateCompleted, 30*time.Second)
	}
	if s.exited() {
		t.Fatalf("the server exited")
	}
}
