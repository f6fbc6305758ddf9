package slurm

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corralexec "github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/exectest"
)

// localSlurm brings up scripts/slurm-local.sh's Slurm (two nodes,
// corral-n1 and corral-n2, two fake GPUs each) and points Slurm's commands
// at it, or skips the test when Slurm is not installed or this is not
// root. A Slurm it started is stopped in t.Cleanup.
func localSlurm(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sbatch"); err != nil {
		t.Skip("Slurm is not installed (apt-get install -y slurm-wlm munge): sbatch not in $PATH")
	}
	if _, err := os.Stat("/usr/sbin/slurmctld"); err != nil {
		t.Skip("Slurm is not installed (apt-get install -y slurm-wlm munge): no /usr/sbin/slurmctld")
	}
	if os.Geteuid() != 0 {
		t.Skip("the local Slurm needs root (scripts/slurm-local.sh)")
	}
	script, _ := filepath.Abs("../../../scripts/slurm-local.sh")
	dir := "/tmp/corral-slurm" // the script's default: its ports are fixed, so one user at a time
	// The packages that use this Slurm (e2e, internal/exec/slurm) take
	// turns: go test runs packages in parallel.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // runs last: releases the lock
	wasUp := exec.Command("sh", "-c", "kill -0 $(cat "+dir+"/slurmctld.pid)").Run() == nil
	up := exec.Command("sh", script, "up")
	up.Env = append(os.Environ(), "SLURM_LOCAL_DIR="+dir)
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("slurm-local.sh up: %v\n%s", err, out)
	}
	if !wasUp {
		t.Cleanup(func() {
			down := exec.Command("sh", script, "down")
			down.Env = append(os.Environ(), "SLURM_LOCAL_DIR="+dir)
			down.Run()
		})
	}
	// Jobs of this test left by an earlier run, or by this one when it
	// fails, are canceled.
	cancelLeft := func() {
		c := exec.Command("sh", "-c", `squeue -h -o "%i %j" | awk '$2 ~ /^corral-conf/ {print $1}' | xargs -r scancel`)
		c.Env = append(os.Environ(), "SLURM_CONF="+dir+"/slurm.conf")
		c.Run()
	}
	cancelLeft()
	t.Cleanup(cancelLeft)
	t.Setenv("SLURM_CONF", dir+"/slurm.conf")
}

// TestConformance runs the executor suite against the real local Slurm.
func TestConformance(t *testing.T) {
	localSlurm(t)
	exectest.Run(t, func(t *testing.T) *exectest.Harness {
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		u := exectest.NewUpdates()
		cfg := Config{Runner: CommandRunner{}, Sink: u.Sink, ScriptDir: filepath.Join(dir, "slurm"), Poll: 200 * time.Millisecond,
			Grace: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
		start := func(t *testing.T) *Executor {
			e, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { e.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			return e
		}
		first := start(t)
		return &exectest.Harness{
			Exec: first, Updates: u, Dir: dir,
			Place: func(nodes, gpus int) ([]corralexec.Rank, bool) {
				if nodes > 2 {
					return nil, false
				}
				var rs []corralexec.Rank
				for i := range nodes {
					r := corralexec.Rank{NodeID: []string{"corral-n1", "corral-n2"}[i]}
					for g := range gpus {
						r.GPUs = append(r.GPUs, g)
					}
					rs = append(rs, r)
				}
				return rs, true
			},
			Restart: func(t *testing.T) corralexec.Executor { return start(t) },
		}
	})
}
