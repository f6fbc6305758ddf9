package server

import (
	"encoding/json"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestHoldOfNoGPUsRefused: a hold must take at least one GPU; one of 0
// (or a missing count) is a 422 naming gpu_count and holds nothing.
func TestHoldOfNoGPUsRefused(t *testing.T) {
	e := newAuthEnv(t)
	for _, body := range []string{`{"job_id":"nb","gpu_count":0}`, `{"job_id":"nb"}`} {
		resp, b := e.do("owner", "POST", "/cluster/gpu-allocate", body, nil)
		var eb api.ErrorBody
		if resp.StatusCode != 422 || json.Unmarshal(b, &eb) != nil || eb.Error.Field != "gpu_count" {
			t.Errorf("%s: %d %s, want 422 naming gpu_count", body, resp.StatusCode, b)
		}
	}
	if _, ok := e.o.HoldOwner("nb"); ok {
		t.Fatal("a refused hold was made")
	}
	if resp, b := e.do("owner", "POST", "/cluster/gpu-allocate", `{"job_id":"nb","gpu_count":1}`, nil); resp.StatusCode != 201 {
		t.Fatalf("a hold of 1 GPU: %d %s", resp.StatusCode, b)
	}
}
