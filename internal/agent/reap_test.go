package agent

import (
	"crypto/rand"
	"os"
	osexec "os/exec"
	"syscall"
	"testing"
	"time"
)

// startWithJobID starts a process group `sh -c 'sleep 1000; true'` with
// CORRAL_JOB_ID=id, as a job of a crashed server would be, and returns the
// channel closed once it has been reaped.
func startWithJobID(t *testing.T, id string) (*osexec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := osexec.Command("/bin/sh", "-c", "sleep 1000; true")
	cmd.Env = append(os.Environ(), "CORRAL_JOB_ID="+id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd, done
}

func TestKillStrays(t *testing.T) {
	target, other := "job-"+rand.Text(), "job-"+rand.Text()
	victim, victimDone := startWithJobID(t, target)
	bystander, bystanderDone := startWithJobID(t, other)

	// The processes' environments are readable once they have exec'd.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, okA := environJobID(victim.Process.Pid)
		b, okB := environJobID(bystander.Process.Pid)
		if okA && okB && a == target && b == other {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job processes not visible in /proc")
		}
		time.Sleep(5 * time.Millisecond)
	}

	n, err := KillStrays(nil, map[string]bool{target: true, "job-absent": true})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Errorf("KillStrays killed %d processes, want at least 1", n)
	}
	select {
	case <-victimDone:
		if ws := victim.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("victim ended with %v, want SIGKILL", victim.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("victim still running")
	}
	select {
	case <-bystanderDone:
		t.Fatalf("process of another job was killed: %v", bystander.ProcessState)
	default:
	}
	if err := syscall.Kill(bystander.Process.Pid, 0); err != nil {
		t.Errorf("bystander: %v", err)
	}
}

func TestKillStraysNothingToDo(t *testing.T) {
	if n, err := KillStrays(nil, nil); n != 0 || err != nil {
		t.Errorf("KillStrays(nil) = %d, %v", n, err)
	}
	if n, err := KillStrays(nil, map[string]bool{"job-" + rand.Text(): true}); n != 0 || err != nil {
		t.Errorf("KillStrays(unknown) = %d, %v", n, err)
	}
}
