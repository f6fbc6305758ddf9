package slurm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	corralexec "github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/exectest"
	"github.com/corral-sched/corral/internal/exec/slurm/slurmtest"
)

// localSlurm brings up scripts/slurm-local.sh's Slurm (two nodes,
// corral-n1 and corral-n2, two fake GPUs each) and points Slurm's commands
// at it, or skips the test when Slurm is not installed or this is not
// root. A Slurm it started is stopped in t.Cleanup.
func localSlurm(t *testing.T) {
	t.Helper()
	script, _ := filepath.Abs("../../../scripts/slurm-local.sh")
	t.Setenv("SLURM_CONF", slurmtest.Up(t, script, "corral-conf"))
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
