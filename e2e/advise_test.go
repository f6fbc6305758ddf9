package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestAdvise runs two jobs on the simulated cluster and checks that
// corral advise profiles them (jobs, GPU-hours, peak) and prices the load
// on the cluster and on cloud instances, with an edited price table too.
func TestAdvise(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	a := s.submit(map[string]any{"command": "sleep 1", "gpu_count": 2, "gpu_memory_gb": 20})
	b := s.submit(map[string]any{"command": "sleep 1", "gpu_count": 4})
	s.waitState(a.ID, api.StateCompleted, 30*time.Second)
	s.waitState(b.ID, api.StateCompleted, 30*time.Second)

	out, errOut, code := runCLI(t, env, "advise", "--since", "1d", "-o", "json")
	if code != 0 {
		t.Fatalf("corral advise: exit %d: %s", code, errOut)
	}
	var rep struct {
		Profile api.LoadProfile `json:"profile"`
		Options []struct {
			Name    string  `json:"name"`
			Monthly float64 `json:"monthly"`
			Covers  float64 `json:"covers"`
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("corral advise -o json: %v\n%s", err, out)
	}
	p := rep.Profile
	if p.Jobs != 2 || p.MaxJobGPUs != 4 || p.GPUHours <= 0 {
		t.Errorf("profile = %+v; want 2 jobs, the largest of 4 GPUs, some GPU-hours", p)
	}
	// Each job slept 1s on its GPUs: 6 GPU-seconds at least, and far less
	// than a minute.
	if secs := p.GPUHours * 3600; secs < 6 || secs > 60 {
		t.Errorf("GPU-seconds = %g, want 6 to 60", secs)
	}
	if p.ClusterGPUs == nil || len(p.ClusterGPUs) == 0 {
		t.Errorf("the profile has no cluster GPUs: %+v", p.ClusterGPUs)
	}
	var cluster, t4 bool
	for _, o := range rep.Options {
		cluster = cluster || strings.HasPrefix(o.Name, "cluster")
		t4 = t4 || strings.HasPrefix(o.Name, "g4dn")
	}
	if !cluster || !t4 {
		t.Errorf("options %+v: want the cluster and a T4 instance", rep.Options)
	}

	// The table form, and an edited price table with one instance.
	out, errOut, code = runCLI(t, env, "advise", "--since", "1d")
	if code != 0 || !strings.Contains(out, "GPUs held at once: peak") || !strings.Contains(out, "MONTHLY") {
		t.Errorf("corral advise: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	prices := filepath.Join(t.TempDir(), "prices.json")
	os.WriteFile(prices, []byte(`{"currency": "EUR", "instances": [{"name": "only-one", "provider": "x", "gpu": "T4", "gpus": 4, "gpu_memory_gb": 16, "on_demand": 1}]}`), 0o600)
	out, errOut, code = runCLI(t, env, "advise", "--since", "1d", "--prices", prices)
	if code != 0 || !strings.Contains(out, "only-one on-demand") || strings.Contains(out, "g4dn") || !strings.Contains(out, "EUR") {
		t.Errorf("corral advise --prices: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	// 20GB per GPU does not fit a 16GB T4: half the GPU-hours covered at most.
	if !strings.Contains(out, "asking more than 16GB per GPU left out") {
		t.Errorf("the 20GB job was not left out of the 16GB instance:\n%s", out)
	}

	// Bad input names what is wrong, and changes nothing.
	os.WriteFile(prices, []byte(`{"instances": [{"name": "x", "gpus": 0}]}`), 0o600)
	if _, errOut, code = runCLI(t, env, "advise", "--prices", prices); code == 0 || !strings.Contains(errOut, "gpus") {
		t.Errorf("a bad price table: exit %d, stderr %s", code, errOut)
	}
	r := s.do(http.MethodGet, "/advise?since=banana", nil, nil)
	if r.Status != http.StatusUnprocessableEntity || errorBody(t, r).Field != "since" {
		t.Errorf("GET /advise?since=banana: %v", r)
	}
	if out, _, code = runCLI(t, env, "advise", "--print-prices"); code != 0 || !strings.Contains(out, "p5.48xlarge") {
		t.Errorf("corral advise --print-prices: exit %d\n%s", code, out)
	}
}
