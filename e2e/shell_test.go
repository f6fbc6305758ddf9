package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/corral-sched/corral/internal/api"
)

// gpuList is a job's GPUs as CUDA_VISIBLE_DEVICES lists them.
func gpuList(j api.Job) string {
	var s []string
	for _, a := range j.Allocation {
		s = append(s, strconv.Itoa(a.GPUID))
	}
	return strings.Join(s, ",")
}

// checkShellRun runs `corral shell JOB -- sh -c ...` without a terminal
// and checks that it prints the job's devices, id and node, keeps stderr
// apart, and exits with the command's code.
func checkShellRun(t *testing.T, s *server, j api.Job, node string) {
	t.Helper()
	env := []string{"CORRAL_SERVER=" + s.URL}
	stdout, stderr, code := runCLI(t, env, "shell", j.ID, "--", "sh", "-c",
		`echo "$CUDA_VISIBLE_DEVICES $CORRAL_JOB_ID $CORRAL_NODE_ID"; echo to-stderr >&2; exit 3`)
	want := gpuList(j) + " " + j.ID + " " + node
	if code != 3 || strings.TrimSpace(stdout) != want || !strings.Contains(stderr, "to-stderr") || strings.Contains(stdout, "to-stderr") {
		t.Fatalf("corral shell: exit %d (want 3), stdout %q (want %q), stderr %q", code, stdout, want, stderr)
	}
	// Input streams to the command; its exit code 0 is corral's.
	cmd := exec.Command(corralBin, "shell", j.ID, "--", "sh", "-c", "tr a-z A-Z")
	cmd.Env = cleanEnv("CORRAL_TOKEN="+adminToken, "CORRAL_SERVER="+s.URL, "CORRAL_CONFIG="+filepath.Join(t.TempDir(), "c.json"))
	cmd.Stdin = strings.NewReader("hello through the tunnel\n")
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "HELLO THROUGH THE TUNNEL" {
		t.Fatalf("corral shell with stdin: %v, %q", err, out)
	}
}

// TestShellLocal: corral shell in a job of `corral up`'s own node runs in
// the job's environment and passes the exit code; only the owner (and
// admins) may attach, and every attach is audited.
func TestShellLocal(t *testing.T) {
	s := startServer(t)
	cli := func(token string, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, []string{"CORRAL_SERVER=" + s.URL, "CORRAL_TOKEN=" + token}, args...)
	}
	var ana, bob api.NewToken
	for _, tk := range []struct {
		user string
		dst  *api.NewToken
	}{{"ana", &ana}, {"bob", &bob}} {
		stdout, stderr, code := cli(adminToken, "token", "create", "--user", tk.user, "-o", "json")
		if code != 0 || json.Unmarshal([]byte(stdout), tk.dst) != nil {
			t.Fatalf("token create %s: exit %d %s %s", tk.user, code, stdout, stderr)
		}
	}
	stdout, stderr, code := cli(ana.Secret, "submit", "-o", "json", "--gpus", "2", "--", "sleep 600")
	var j api.Job
	if code != 0 || json.Unmarshal([]byte(stdout), &j) != nil {
		t.Fatalf("submit: exit %d %s %s", code, stdout, stderr)
	}
	j = s.waitState(j.ID, api.StateRunning, 20*time.Second)
	checkShellRun(t, s, j, "e2e-node") // as the admin

	if stdout, stderr, code := cli(ana.Secret, "shell", j.ID, "--", "sh", "-c", "exit 5"); code != 5 {
		t.Errorf("the owner's shell: exit %d, want 5: %s %s", code, stdout, stderr)
	}
	if _, stderr, code := cli(bob.Secret, "shell", j.ID, "--", "true"); code != 1 || !strings.Contains(stderr, "ana") {
		t.Errorf("another user's shell: exit %d, want 1 naming the owner: %s", code, stderr)
	}
	// A queued job has no shell yet.
	q := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 8})
	if _, stderr, code := cli(adminToken, "shell", q.ID, "--", "true"); code != 1 || !strings.Contains(stderr, "queued") {
		t.Errorf("shell of a queued job: exit %d, want 1 saying it is queued: %s", code, stderr)
	}

	stdout, stderr, code = cli(adminToken, "audit", "--action", "job.shell", "-o", "json")
	var l api.AuditList
	if code != 0 || json.Unmarshal([]byte(stdout), &l) != nil {
		t.Fatalf("audit: exit %d %s %s", code, stdout, stderr)
	}
	got := map[string][]int{}
	for _, e := range l.Entries {
		if e.Target == j.ID {
			got[e.User] = append(got[e.User], e.Status)
		}
	}
	if !slicesHave(got["ana"], 101) || !slicesHave(got["bob"], 403) || !slicesHave(got["admin"], 101) {
		t.Errorf("job.shell audit entries by user: %v; want ana 101, bob 403, admin 101", got)
	}
}

func slicesHave(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestShellRemoteAgent: the same through `corral server` and a remote
// `corral agent`, whose shells go through the agent's tunnel.
func TestShellRemoteAgent(t *testing.T) {
	s := startCluster(t)
	startAgent(t, s, "far-node", 4)
	j := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 2})
	j = s.waitState(j.ID, api.StateRunning, 20*time.Second)
	checkShellRun(t, s, j, "far-node")

	// The shell's environment is the job's: the agent's join token is not
	// in it.
	if stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "shell", j.ID, "--", "env"); code != 0 || strings.Contains(stdout, joinToken) || !strings.Contains(stdout, "CORRAL_JOB_ID="+j.ID) {
		t.Fatalf("corral shell -- env: exit %d, join token shown: %v; %s", code, strings.Contains(stdout, joinToken), stderr)
	}

	// A gang's rank 1 runs on the other node: --rank reaches it there.
	startAgent(t, s, "other-node", 4)
	g := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 2, "nodes": 2})
	s.waitState(g.ID, api.StateRunning, 20*time.Second)
	env := []string{"CORRAL_SERVER=" + s.URL}
	ranks := map[string]string{}
	for _, rank := range []string{"0", "1"} {
		stdout, stderr, code := runCLI(t, env, "shell", g.ID, "--rank", rank, "--", "sh", "-c", `echo "$CORRAL_NODE_RANK $CORRAL_NODE_ID"`)
		f := strings.Fields(stdout)
		if code != 0 || len(f) != 2 || f[0] != rank {
			t.Fatalf("shell --rank %s: exit %d, %q %q", rank, code, stdout, stderr)
		}
		ranks[rank] = f[1]
	}
	if ranks["0"] == ranks["1"] {
		t.Fatalf("ranks 0 and 1 both on %s", ranks["0"])
	}
	if _, stderr, code := runCLI(t, env, "shell", g.ID, "--rank", "2", "--", "true"); code != 1 || !strings.Contains(stderr, "rank") {
		t.Fatalf("shell --rank 2 of a 2-node gang: exit %d, %s", code, stderr)
	}
}

// ptyProc is a corral command run under a PTY, as a person at a terminal
// runs it.
type ptyProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	out  *lockedBuffer
	done chan struct{}
}

func startPTY(t *testing.T, env []string, args ...string) *ptyProc {
	t.Helper()
	p := &ptyProc{t: t, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(corralBin, args...)
	p.cmd.Env = cleanEnv(append([]string{"CORRAL_TOKEN=" + adminToken, "TERM=xterm", "CORRAL_CONFIG=" + filepath.Join(t.TempDir(), "c.json")}, env...)...)
	tty, err := pty.StartWithSize(p.cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	p.tty = tty
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		tty.Close()
		if t.Failed() {
			t.Logf("terminal output:\n%s", truncate(p.out.String(), 8000))
		}
	})
	return p
}

func (p *ptyProc) send(s string) {
	p.t.Helper()
	if _, err := p.tty.Write([]byte(s)); err != nil {
		p.t.Fatalf("write to the terminal: %v", err)
	}
}

// expect waits until the terminal has shown re, and returns its match.
func (p *ptyProc) expect(re string, timeout time.Duration) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	waitFor(p.t, timeout, func() string { return fmt.Sprintf("%q on the terminal", re) }, func() bool {
		m = rx.FindStringSubmatch(p.out.String())
		return m != nil
	})
	return m
}

// exitCode waits for the command to end and returns its exit code.
func (p *ptyProc) exitCode(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("corral did not exit within %s", timeout)
	}
	var ee *exec.ExitError
	if err := p.cmd.Wait(); err != nil && !errors.As(err, &ee) && p.cmd.ProcessState == nil {
		p.t.Fatal(err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// TestShellPTY: an interactive shell follows the window's size, Ctrl-C
// interrupts the remote command (not corral), and exit's code is corral's.
func TestShellPTY(t *testing.T) {
	s := startServer(t)
	j := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 1})
	j = s.waitState(j.ID, api.StateRunning, 20*time.Second)
	p := startPTY(t, []string{"CORRAL_SERVER=" + s.URL}, "shell", j.ID)
	p.send("echo SIZE=$(stty size | tr ' ' x) GPUS=$CUDA_VISIBLE_DEVICES\r")
	p.expect(`SIZE=30x100 GPUS=`+gpuList(j), 15*time.Second)

	if err := pty.Setsize(p.tty, &pty.Winsize{Rows: 44, Cols: 132}); err != nil {
		t.Fatal(err)
	}
	// SIGWINCH reaches corral asynchronously: ask until the new size shows.
	waitFor(t, 15*time.Second, func() string { return "stty size to show 44x132" }, func() bool {
		p.send("echo SIZE=$(stty size | tr ' ' x)\r")
		time.Sleep(100 * time.Millisecond) // poll interval
		return strings.Contains(p.out.String(), "SIZE=44x132")
	})

	// Ctrl-C interrupts a long sleep in the remote shell; the shell and
	// corral go on.
	p.send("sleep 600; echo NOT-$((1+1))-INTERRUPTED\r")
	time.Sleep(300 * time.Millisecond) // let the sleep start: a ^C typed before it reaches the line editor instead
	p.send("\x03")
	p.send("echo AFTER=$((40+2))\r")
	p.expect(`AFTER=42`, 15*time.Second)
	if strings.Contains(p.out.String(), "NOT-2-INTERRUPTED") {
		t.Fatal("the sleep was not interrupted")
	}
	p.send("exit 7\r")
	if code := p.exitCode(15 * time.Second); code != 7 {
		t.Fatalf("corral shell exited %d, want 7", code)
	}
	if got := s.job(j.ID); got.State != api.StateRunning {
		t.Fatalf("the job is %s after its shell ended; want it running", got.State)
	}
}

// TestAlloc: corral alloc queues while the cluster is full, then opens a
// shell on its GPUs; exiting the shell ends the allocation with its code.
func TestAlloc(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "e2e-node")
	filler := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 2})
	s.waitState(filler.ID, api.StateRunning, 20*time.Second)

	// Ctrl-C while queued cancels the request.
	p := startPTY(t, []string{"CORRAL_SERVER=" + s.URL}, "alloc", "--gpus", "1")
	m := p.expect(`allocation (\S+) queued, position`, 20*time.Second)
	p.send("\x03")
	if code := p.exitCode(15 * time.Second); code != 130 {
		t.Fatalf("corral alloc after Ctrl-C while queued: exit %d, want 130", code)
	}
	if j := s.waitTerminal(m[1], 10*time.Second); j.State != api.StateCanceled {
		t.Fatalf("the canceled request is %s", j.State)
	}

	p = startPTY(t, []string{"CORRAL_SERVER=" + s.URL}, "alloc", "--gpus", "1")
	m = p.expect(`allocation (\S+) queued, position`, 20*time.Second)
	id := m[1]
	// Its class is interactive.
	if j := s.job(id); j.State != api.StateQueued || j.Class != api.ClassInteractive {
		t.Fatalf("the allocation's job is %s of class %q; want queued, interactive", j.State, j.Class)
	}
	s.do("DELETE", "/queue/"+filler.ID, nil, nil)
	p.expect(`allocation \S+ granted`, 30*time.Second)
	j := s.job(id)
	p.send("echo CVD=$CUDA_VISIBLE_DEVICES JOB=$CORRAL_JOB_ID\r")
	p.expect(`CVD=`+gpuList(j)+` JOB=`+id, 15*time.Second)
	p.send("exit 4\r")
	if code := p.exitCode(20 * time.Second); code != 4 {
		t.Fatalf("corral alloc exited %d, want the shell's 4", code)
	}
	if j := s.waitTerminal(id, 20*time.Second); j.State != api.StateCanceled {
		t.Fatalf("the allocation is %s after its shell exited; want canceled", j.State)
	}
}

// TestAllocTimeLimit: at its --time the allocation ends, and its shell is
// told and closed.
func TestAllocTimeLimit(t *testing.T) {
	s := startServer(t)
	p := startPTY(t, []string{"CORRAL_SERVER=" + s.URL}, "alloc", "--gpus", "1", "--time", "3s")
	p.expect(`allocation (\S+) granted`, 20*time.Second)
	p.expect(`job \S+ has ended`, 30*time.Second)
	if code := p.exitCode(20 * time.Second); code == 0 {
		t.Fatal("corral alloc exited 0 when its time limit ended it")
	}
	ended := regexp.MustCompile(`allocation (\S+) `).FindStringSubmatch(p.out.String())
	if j := s.waitTerminal(ended[1], 20*time.Second); !strings.Contains(fmt.Sprint(eventReasons(j)), api.ReasonTimeLimit) {
		t.Fatalf("the allocation ended as %s, reasons %v; want time_limit", j.State, eventReasons(j))
	}
}

func eventReasons(j api.Job) []string {
	var r []string
	for _, e := range j.Events {
		r = append(r, e.Reason)
	}
	return r
}

// TestShellRunAs: a root agent runs a shell as the job's Unix account,
// as it runs the job, and gives it its terminal.
func TestShellRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root agent switches users")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody on this machine")
	}
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "runas-node", "--run-as", "user")
	j := s.submit(map[string]any{"user": "nobody", "gpu_count": 1, "workdir": "/", "command": "sleep 600"})
	j = s.waitState(j.ID, api.StateRunning, 20*time.Second)
	stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "shell", j.ID, "--", "sh", "-c", "echo $(id -u) $(pwd)")
	if code != 0 || strings.TrimSpace(stdout) != nobody.Uid+" /" {
		t.Fatalf("shell as nobody: exit %d, %q (want %q) %s", code, stdout, nobody.Uid+" /", stderr)
	}
	p := startPTY(t, []string{"CORRAL_SERVER=" + s.URL}, "shell", j.ID)
	p.send("echo U=$(id -u) T=$(stat -c %u $(tty))\r")
	p.expect(`U=`+nobody.Uid+` T=`+nobody.Uid, 15*time.Second)
	p.send("exit\r")
	if code := p.exitCode(15 * time.Second); code != 0 {
		t.Fatalf("corral shell exited %d", code)
	}
}
