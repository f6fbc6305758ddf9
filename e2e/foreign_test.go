package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A GPU running a process Corral did not start is reported foreign, with
// the process's pid and user, in the API and the CLI, and is not handed
// out until the process is gone. (The simulated GPUs read their foreign
// processes from a file, as real ones are read from NVML.)
func TestAgentForeignProcessKeepsItsGPU(t *testing.T) {
	s := startCluster(t)
	squatter := exec.Command("sleep", "120")
	if err := squatter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { squatter.Process.Kill(); squatter.Wait() })
	pid := squatter.Process.Pid
	foreign := filepath.Join(t.TempDir(), "foreign.json")
	if err := os.WriteFile(foreign, fmt.Appendf(nil, `[{"gpu": 1, "pid": %d, "user": "mallory", "name": "python"}]`, pid), 0o644); err != nil {
		t.Fatal(err)
	}
	startAgent(t, s, "n1", 2, "--simulate-foreign", foreign)

	var g api.GPU
	waitFor(t, 10*time.Second, func() string { return fmt.Sprintf("GPU 1 to be foreign (%+v)", g) }, func() bool {
		c := s.cluster()
		if len(c.Nodes) != 1 || len(c.Nodes[0].GPUs) != 2 {
			return false
		}
		g = c.Nodes[0].GPUs[1]
		return c.ForeignGPUs == 1 && len(g.Foreign) == 1
	})
	if p := g.Foreign[0]; p.PID != pid || p.User != "mallory" || g.AllocatedTo != nil {
		t.Errorf("GPU 1: foreign %+v, allocated to %v; want pid %d of mallory, not allocated", p, g.AllocatedTo, pid)
	}
	out, _, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "nodes")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("foreign:%d(mallory)", pid)) {
		t.Errorf("corral nodes (exit %d) does not show the foreign process:\n%s", code, out)
	}

	// The node's GPUs are not both free: a 2-GPU job waits, and says why.
	j := s.submit(map[string]any{"command": "echo $CUDA_VISIBLE_DEVICES", "gpu_count": 2})
	s.waitJob(j.ID, 10*time.Second, "to say why it waits", func(j api.Job) bool { return j.PendingMessage != "" })
	if got := s.job(j.ID); got.State != api.StateQueued {
		t.Fatalf("a 2-GPU job is %s while one of the 2 GPUs runs a foreign process", got.State)
	} else if !strings.Contains(got.PendingMessage, "1 such GPU runs processes Corral did not start") {
		t.Errorf("pending message %q does not name the GPU a foreign process holds", got.PendingMessage)
	}
	// The process goes away: the GPU is Corral's again.
	if err := os.WriteFile(foreign, []byte(`[]`), 0o644); err != nil {
		t.Fatal(err)
	}
	got := s.waitState(j.ID, api.StateCompleted, 20*time.Second)
	if len(got.Allocation) != 2 {
		t.Errorf("allocation %v; want both GPUs", got.Allocation)
	}
	if c := s.cluster(); c.ForeignGPUs != 0 {
		t.Errorf("foreign_gpus %d after the process left; want 0", c.ForeignGPUs)
	}
}
