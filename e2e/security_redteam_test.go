package e2e

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// These tests repeat, as black-box regressions, the holes an adversarial
// pass over the real binary found after the first security fixes were merged.

// TestSecurityTerminalEscapesInTables: a job name or command that any user
// chooses, and a hostname or GPU model that any holder of the join token
// registers, reach the terminal of whoever runs corral jobs, show or nodes.
// They are printed with their control characters written out, so that they
// cannot retitle the window, clear the screen or overwrite other rows.
func TestSecurityTerminalEscapesInTables(t *testing.T) {
	s := startCluster(t)
	evil := "\x1b]0;pwned\x07\x1b[2J\u009b2Jevil"
	h := &hostileAgent{s: s, node: "evil-node"}
	h.register("evil-agent-0123456789", 1)
	h.sync(map[string]any{"foreign": []map[string]any{{"gpu": 0, "pid": 77, "user": evil, "name": evil}}})
	j := s.submit(map[string]any{"name": evil, "command": "echo " + evil, "gpu_count": 1, "workdir": "/tmp",
		"node_labels": map[string]string{"none": "such"}})
	env := []string{"CORRAL_SERVER=" + s.URL}
	for _, args := range [][]string{{"jobs"}, {"queue"}, {"show", j.ID}, {"nodes"}} {
		out, stderr, code := runCLI(t, env, args...)
		if code != 0 {
			t.Fatalf("corral %v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(out, "evil") {
			t.Fatalf("corral %v does not show the hostile name at all:\n%s", args, out)
		}
		if strings.ContainsAny(out, "\x1b\x07\u009b") {
			t.Errorf("corral %v prints control characters a name chose: %q", args, out)
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07`) {
			t.Errorf("corral %v does not write the escapes out visibly: %q", args, out)
		}
	}
}

// TestSecurityAgentRegistrationText: a holder of the join token cannot put
// control characters in what it registers (hostname, GPU model and uuid,
// version, labels), nor an address that is not a host or an IP address
// (other nodes' jobs get it as CORRAL_MASTER_ADDR): 422 naming the field,
// and no node is made.
func TestSecurityAgentRegistrationText(t *testing.T) {
	s := startCluster(t)
	h := &hostileAgent{s: s, node: "evil-text"}
	gpu := func(uuid, model string) []map[string]any {
		return []map[string]any{{"index": 0, "uuid": uuid, "model": model, "memory_mib": 81920}}
	}
	cases := []struct {
		name  string
		reg   map[string]any
		field string
	}{
		{"escape in hostname", map[string]any{"hostname": "\x1b]0;pwned\x07", "gpus": gpu("GPU-x", "H100")}, "hostname"},
		{"escape in GPU model", map[string]any{"hostname": "h", "gpus": gpu("GPU-x", "\x1b[2J")}, "gpus[0].model"},
		{"newline in GPU uuid", map[string]any{"hostname": "h", "gpus": gpu("GPU\nx", "H100")}, "gpus[0].uuid"},
		{"escape in a label", map[string]any{"hostname": "h", "gpus": gpu("GPU-x", "H100"), "labels": map[string]string{"rack": "\x1b[2J"}}, "labels"},
		{"label name with =", map[string]any{"hostname": "h", "gpus": gpu("GPU-x", "H100"), "labels": map[string]string{"a=b": "c"}}, "labels"},
		{"shell in address", map[string]any{"hostname": "h", "gpus": gpu("GPU-x", "H100"), "address": "10.0.0.1; rm -rf ~"}, "address"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := map[string]any{"node_id": h.node, "agent_id": "evil-agent-text-0123456789", "tasks": []any{}}
			for k, v := range c.reg {
				body[k] = v
			}
			r := h.call("/agent/v1/register", body)
			if r.Status != 422 || errorBody(t, r).Field != c.field {
				t.Fatalf("register: %s; want 422 naming %q", r, c.field)
			}
		})
	}
	for _, n := range s.cluster().Nodes {
		if n.NodeID == h.node {
			t.Fatalf("a refused registration made node %s", n.NodeID)
		}
	}
}

// TestSecurityForeignDataDirRefused: root starts corral server or corral
// agent on a data dir another account made (under /tmp, say, waiting for
// it), with a "lock" that links to a file of root's and an admin.token of
// its choosing. The command refuses the dir, saying whose it is, before it
// writes or reads anything there: the linked file is intact and no server
// answers to the planted admin token.
func TestSecurityForeignDataDirRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another account")
	}
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"server", "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t))},
		{"agent", "--server", "http://127.0.0.1:1", "--simulate-gpus", "1"},
	} {
		t.Run(args[0], func(t *testing.T) {
			dir := filepath.Join(base, args[0]+"-planted")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(dir, "lock")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("planted-admin-token-0123456789\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := chownTree(dir, 65534); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := runCLI(t, []string{"CORRAL_JOIN_TOKEN=" + joinToken, "CORRAL_ADMIN_TOKEN="}, append(args, "--data-dir", dir)...)
			if code == 0 || !strings.Contains(stderr, "is owned by uid 65534") {
				t.Fatalf("corral %s on another account's data dir: exit %d, %s; want it refused naming the owner", args[0], code, stderr)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
				t.Fatalf("the file the planted lock linked to is now %q (%v)", b, err)
			}
		})
	}
}

// chownTree gives dir and everything in it to uid (links themselves, not
// what they name).
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
}

// TestSecurityInheritedFDsDoNotReachJobs: whatever started corral up may
// have left a descriptor open (here a shell's 7>>file: a file root opened
// for writing). A job, which may run as another account, does not inherit
// it.
func TestSecurityInheritedFDsDoNotReachJobs(t *testing.T) {
	dir := t.TempDir()
	leak := filepath.Join(dir, "opened-by-root")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &server{
		t: t, URL: "http://" + addr, Port: port, DataDir: filepath.Join(dir, "data"),
		http: &http.Client{Timeout: 30 * time.Second, Transport: newWithToken(adminToken)},
		proc: &proc{out: &lockedBuffer{}, done: make(chan struct{})},
	}
	s.cmd = exec.Command("/bin/sh", "-c", `exec "$0" up --simulate-gpus 1 --node-name fd-node --run-as agent --listen "$1" --data-dir "$2" 7>>"$3"`,
		corralBin, addr, s.DataDir, leak)
	s.cmd.Env = cleanEnv("CORRAL_ADMIN_TOKEN="+adminToken, "CORRAL_CONFIG="+filepath.Join(dir, "client.json"))
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.stop)
	waitFor(t, 30*time.Second, func() string { return "corral up did not answer: " + s.out.String() }, func() bool {
		return !s.exited() && s.healthy()
	})
	j := s.submit(map[string]any{"command": "ls -l /proc/$$/fd", "gpu_count": 1, "workdir": "/tmp"})
	if got := s.waitTerminal(j.ID, 30*time.Second); got.State != api.StateCompleted {
		t.Fatalf("job %s (%s): %s", got.State, got.Reason, s.logs(j.ID))
	}
	out := s.logs(j.ID)
	if !strings.Contains(out, "->") {
		t.Fatalf("the job did not list its descriptors: %q", out)
	}
	if strings.Contains(out, leak) {
		t.Errorf("a job inherited a descriptor corral up was started with:\n%s", out)
	}
}
