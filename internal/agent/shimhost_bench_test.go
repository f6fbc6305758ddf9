package agent

import (
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// BenchmarkTaskStart times one job (`/bin/sh -c true`) from start to its
// reported end, one at a time, by each way an agent can run it, beside a
// bare fork, exec and wait of the same command in the same run:
// direct (a child of the agent, as `corral up` ran jobs before its jobs
// outlived it), shim (a `corral shim` process per job, as standalone
// agents run them) and host (one shim host for every job, as `corral up`
// runs them now). The shim is this test binary, as in the tests.
func BenchmarkTaskStart(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		for range b.N {
			if err := osexec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []string{"direct", "shim", "host"} {
		b.Run(mode, func(b *testing.B) {
			b.Setenv("CORRAL_AGENT_TEST_SHIM", "1")
			dir := b.TempDir()
			ch := make(chan struct{}, 1)
			ts := &tasks{stateDir: filepath.Join(dir, "state"), logDir: filepath.Join(dir, "logs"), nodeID: "n1",
				detach: mode != "direct", unfenced: mode == "host", runAs: RunAsAgent, shim: []string{os.Args[0]},
				log: slog.New(slog.DiscardHandler), byKey: map[taskKey]*task{},
				changed: func() {
					select {
					case ch <- struct{}{}:
					default:
					}
				}}
			os.MkdirAll(ts.stateDir, 0o700)
			defer ts.host.close()
			b.ResetTimer()
			for i := range b.N {
				spec := api.TaskSpec{JobID: fmt.Sprintf("j%d", i), Command: "true"}
				ts.start(spec)
				k := keyOf(spec)
				for {
					ts.mu.Lock()
					done := ts.byKey[k].exited != nil
					ts.mu.Unlock()
					if done {
						break
					}
					<-ch
				}
			}
		})
	}
}
