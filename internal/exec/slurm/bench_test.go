package slurm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corralexec "github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/exec/exectest"
)

// BenchmarkRoundTrip times one attempt of `true` through the executor on
// the real local Slurm, from Start to its Exited update ("executor"),
// beside the same work done by hand ("sbatch"): sbatch --wrap true, then
// squeue at the same poll interval until the job is COMPLETED. The
// difference is the executor's own cost: the batch script, the exit file,
// its polling.
func BenchmarkRoundTrip(b *testing.B) {
	if _, err := exec.LookPath("sbatch"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs Slurm and root")
	}
	b.Setenv("SLURM_CONF", "/tmp/corral-slurm/slurm.conf")
	if exec.Command("sh", "-c", "kill -0 $(cat /tmp/corral-slurm/slurmctld.pid)").Run() != nil {
		b.Skip("the local Slurm is not up (scripts/slurm-local.sh up)")
	}
	const poll = 100 * time.Millisecond
	b.Run("sbatch", func(b *testing.B) {
		dir := b.TempDir()
		for i := 0; i < b.N; i++ {
			out, err := exec.Command("sbatch", "--parsable", "--nodelist=corral-n1", "--gres=gpu:1", "-o", filepath.Join(dir, "%j.out"), "--wrap", "true").Output()
			if err != nil {
				b.Fatal(err)
			}
			id := strings.TrimSpace(string(out))
			for {
				st, _ := exec.Command("squeue", "-h", "-t", "all", "-j", id, "-o", "%T").Output()
				if strings.TrimSpace(string(st)) == "COMPLETED" {
					break
				}
				time.Sleep(poll)
			}
		}
	})
	b.Run("executor", func(b *testing.B) {
		dir := b.TempDir()
		u := exectest.NewUpdates()
		e, err := New(Config{Runner: CommandRunner{}, Sink: u.Sink, ScriptDir: filepath.Join(dir, "slurm"), Poll: poll, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go e.Run(ctx)
		for i := 0; i < b.N; i++ {
			job := fmt.Sprintf("bench%d-%d", time.Now().UnixNano()%1e9, i)
			tk := corralexec.Task{JobID: job, Command: "true", Ranks: []corralexec.Rank{{NodeID: "corral-n1", GPUs: []int{0}}},
				LogPath: filepath.Join(dir, job+".log")}
			if err := e.Start(ctx, tk); err != nil {
				b.Fatal(err)
			}
			if !u.WaitExited(job, time.Minute) {
				b.Fatalf("job %s did not end within a minute", job)
			}
		}
	})
}
