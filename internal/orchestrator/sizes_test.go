package orchestrator

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestJobSizeLimits: a command or env past its byte limit is a 422 naming
// the field, and one user's jobs that have not ended may hold at most
// MaxUserQueuedBytes (429 user_bytes_full; admins exempt); a job that
// ends, or is canceled, gives its bytes back, and a restart counts them
// again. Before, a job's env could total 8 MB (256 values of 32 KB) and
// nothing bounded a user's bytes (issue 24: 400 jobs of 1 MB each).
func TestJobSizeLimits(t *testing.T) {
	env := func(n int) map[string]string { return map[string]string{"X": strings.Repeat("e", n-1)} }
	limits := Limits{MaxCommandBytes: 100, MaxEnvBytes: 1000, MaxUserQueuedBytes: 3000}
	type sub struct {
		req    api.SubmitRequest
		exempt bool
		status int    // 0: accepted
		field  string // of a 422
	}
	for name, c := range map[string][]sub{
		"command": {
			{req: api.SubmitRequest{Command: strings.Repeat("c", 100)}},
			{req: api.SubmitRequest{Command: strings.Repeat("c", 101)}, status: 422, field: "command"},
		},
		"env": {
			{req: api.SubmitRequest{Command: "c", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", Env: env(1001)}, status: 422, field: "env"},
			{req: api.SubmitRequest{Command: "c", Env: map[string]string{"A": strings.Repeat("a", 600), "B": strings.Repeat("b", 600)}}, status: 422, field: "env"},
		},
		"per user": {
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}, status: 429},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}, exempt: true},
			{req: api.SubmitRequest{Command: "c", User: "v", Env: env(1000)}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000), Array: "0-99"}, status: 429},
		},
		"arrays count once": {
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000), Array: "0-99"}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000), Array: "0-99"}},
			{req: api.SubmitRequest{Command: "c", User: "u", Env: env(1000)}, status: 429},
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Limits: limits})
			h.o.SetScheduling(context.Background(), false)
			for i, s := range c {
				s.req.GPUCount = gpus(1)
				_, _, err := h.o.SubmitWith(context.Background(), s.req, SubmitOptions{Exempt: s.exempt})
				var e *api.Error
				switch {
				case s.status == 0 && err != nil:
					t.Errorf("submission %d: %v", i, err)
				case s.status != 0 && (!errors.As(err, &e) || e.Status != s.status || e.Field != s.field):
					t.Errorf("submission %d: %v, want %d on %q", i, err, s.status, s.field)
				}
			}
		})
	}
}

// TestUserBytesGivenBack: a user's bytes come back when a job is canceled
// and are counted again after a restart.
func TestUserBytesGivenBack(t *testing.T) {
	path := t.TempDir() + "/corral.db"
	cfg := Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Limits: Limits{MaxUserQueuedBytes: 2500}}
	h := startConfig(t, path, cfg)
	ctx := context.Background()
	h.o.SetScheduling(ctx, false)
	req := api.SubmitRequest{Command: "c", User: "u", GPUCount: gpus(1), Env: map[string]string{"X": strings.Repeat("e", 1000)}}
	a := h.submit(req)
	h.submit(req)
	var e *api.Error
	if _, _, err := h.o.Submit(ctx, req, ""); !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Code != "user_bytes_full" {
		t.Fatalf("third submission: %v, want 429 user_bytes_full", err)
	}
	if _, _, err := h.o.Cancel(ctx, a.ID, 0); err != nil {
		t.Fatal(err)
	}
	h.submit(req) // the canceled job's bytes came back
	h.stop()
	h.stop = nil
	h = startConfig(t, path, cfg)
	if _, _, err := h.o.Submit(ctx, req, ""); !errors.As(err, &e) || e.Code != "user_bytes_full" {
		t.Fatalf("after a restart: %v, want 429 user_bytes_full", err)
	}
}
