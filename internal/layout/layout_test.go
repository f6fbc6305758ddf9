package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsPointOneWay fails when a package depends, directly or not, on
// one it must not: the control plane on the agent's NVML code, the store
// on a feature that reads it, one engine on another, the pure core on
// anything with I/O.
func TestImportsPointOneWay(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages' dependencies")
	}
	const mod = "github.com/corral-sched/corral/internal/"
	for _, c := range []struct {
		pkg       string
		forbidden []string
	}{
		{"orchestrator", []string{"agent", "agent/gpu", "agent/contain", "server", "daemon"}},
		{"server", []string{"agent/gpu", "agent/contain", "daemon"}},
		{"store", []string{"advise", "orchestrator", "server", "agent"}},
		{"store/memstore", []string{"advise", "orchestrator", "server", "agent", "feature"}},
		{"sched", []string{"store", "orchestrator", "server", "agent", "exec"}},
		{"exec/slurm", []string{"exec/agents", "exec/ray", "exec/k8s", "agent"}},
		{"exec/ray", []string{"exec/agents", "exec/slurm", "exec/k8s", "agent"}},
		{"exec/k8s", []string{"exec/agents", "exec/slurm", "exec/ray", "agent"}},
		{"export", []string{"exec/k8s", "orchestrator", "server"}}, // exec/k8s/pod only: the CLI stays light
		{"gpuinfo", []string{"agent/gpu"}},
		{"cmdkit", []string{"orchestrator", "server", "store", "agent", "daemon"}},
		// A feature plugs into the loop through package feature's
		// interfaces: it never reaches back into the orchestrator.
		{"jobspec", []string{"orchestrator", "store", "server", "exec", "agent"}},
		{"policy", []string{"orchestrator", "server", "exec", "agent"}},
		{"feature", []string{"orchestrator", "server", "exec", "agent"}},
		{"feature/jobio", []string{"orchestrator", "server", "agent"}},
		{"feature/cpujobs", []string{"orchestrator", "server", "agent"}},
		{"feature/sizes", []string{"orchestrator", "server", "agent"}},
		{"feature/history", []string{"orchestrator", "server", "agent"}},
		{"feature/holds", []string{"orchestrator", "server", "agent"}},
		{"feature/reclaim", []string{"orchestrator", "server", "agent"}},
		{"feature/notes", []string{"orchestrator", "server", "agent"}},
		{"feature/deps", []string{"orchestrator", "server", "agent"}},
		{"feature/spend", []string{"orchestrator", "server", "agent"}},
		{"feature/bookings", []string{"orchestrator", "server", "agent"}},
		{"feature/arrays", []string{"orchestrator", "server", "agent"}},
		{"feature/refs", []string{"orchestrator", "server", "agent"}},
		{"feature/runtimes", []string{"orchestrator", "server", "agent"}},
		{"feature/limits", []string{"orchestrator", "server", "agent"}},
		{"feature/prune", []string{"orchestrator", "server", "agent"}},
		{"feature/ended", []string{"orchestrator", "server", "agent", "exec"}},
		{"feature/featuretest", []string{"orchestrator", "server", "agent"}},
		{"nodebook", []string{"orchestrator", "server", "agent", "store", "exec", "feature"}},
		{"jobbook", []string{"orchestrator", "server", "agent", "store", "exec", "feature"}},
		{"readview", []string{"orchestrator", "server", "agent", "exec"}},
		{"viewcache", []string{"orchestrator", "server", "agent", "exec", "store", "readview", "feature"}},
		{"joblogs", []string{"orchestrator", "server", "agent", "store"}},
		{"feature/gpushare", []string{"orchestrator", "server", "agent", "store"}},
		{"gpubook", []string{"orchestrator", "server", "agent", "exec"}},
	} {
		out, err := exec.Command("go", "list", "-deps", mod+c.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", c.pkg, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[strings.TrimPrefix(d, mod)] = true
		}
		for _, f := range c.forbidden {
			if deps[f] {
				t.Errorf("internal/%s depends on internal/%s", c.pkg, f)
			}
		}
	}
}
