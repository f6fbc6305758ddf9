package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// accounts makes Unix accounts for one test, as on a shared box: a
// directory every account may reach (their homes, a copy of the corral
// binary, sockets), a group, and accounts in it or not; all removed at the
// end. It needs root and useradd; the test is skipped without them.
type accounts struct {
	t      *testing.T
	prefix string // of account and group names: short, so useradd takes them
	suffix string // this process's, so parallel runs do not collide
	shared string // the directory every account may reach
	bin    string // the corral binary, in shared
	group  string
}

// account is one Unix account made by accounts.add.
type account struct {
	name, home string
	uid, gid   uint32
}

// newAccounts skips the test unless it may make accounts, and makes the
// shared directory (with the binary) and the group.
func newAccounts(t *testing.T, prefix string) *accounts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes Unix accounts and runs the CLI as them")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on this machine", tool)
		}
	}
	shared, err := os.MkdirTemp("", "corral-"+prefix+"-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	a := &accounts{t: t, prefix: prefix, suffix: strconv.Itoa(os.Getpid() % 100000), shared: shared,
		bin: filepath.Join(shared, "corral")}
	copyFile(t, corralBin, a.bin, 0o755)
	a.group = prefix + a.suffix
	mustRun(t, "groupadd", a.group)
	t.Cleanup(func() { exec.Command("groupdel", a.group).Run() })
	return a
}

// add makes the account prefix+short+suffix with its home in the shared
// directory, in the group or not.
func (s *accounts) add(short string, inGroup bool) account {
	t := s.t
	t.Helper()
	a := account{name: s.prefix + short + s.suffix, home: filepath.Join(s.shared, short)}
	args := []string{"--no-create-home", "--home-dir", a.home, "--shell", "/bin/sh", "--user-group"}
	if inGroup {
		args = append(args, "--groups", s.group)
	}
	mustRun(t, "useradd", append(args, a.name)...)
	t.Cleanup(func() { exec.Command("userdel", a.name).Run() })
	u, err := user.Lookup(a.name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	a.uid, a.gid = uint32(uid), uint32(gid)
	if err := os.Mkdir(a.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(a.home, uid, gid); err != nil {
		t.Fatal(err)
	}
	return a
}

// run runs the shared corral binary as a, in its home, with an
// environment of its HOME, USER, PATH and env alone; it fails the test if
// the command does not end within 30 s.
func (s *accounts) run(a account, env []string, args ...string) (stdout, stderr string, code int) {
	t := s.t
	t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = a.home
	cmd.Env = append([]string{"HOME=" + a.home, "USER=" + a.name, "PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.uid, Gid: a.gid}}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatalf("corral %v as %s: %v", args, a.name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("corral %v as %s did not finish within 30s; stderr: %s", args, a.name, e.String())
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}
