package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/store"
)

// TestSubmitAuditCommittedWithJob: once a submission is answered, its job
// and its audit row are both in the store (they are written in one
// transaction), with exactly one audit row per call, accepted or refused,
// and the same fields the middleware writes for other routes.
func TestSubmitAuditCommittedWithJob(t *testing.T) {
	ctx := context.Background()
	st, o, a := newBackend(t, idleExec{}, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(New(o, slog.New(slog.DiscardHandler), WithAuth(a)))
	t.Cleanup(ts.Close)
	if _, err := o.SetScheduling(ctx, false); err != nil {
		t.Fatal(err)
	}
	nt, err := a.Create(ctx, api.TokenRequest{User: "alice", Role: api.RoleUser}, auth.Principal{User: "root", Role: api.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		body, key string
		status    int
		errCode   string // the audit row's error
		job       bool   // a job id is the target
	}{
		"accepted":             {body: `{"command":"true","gpu_count":1}`, key: "k1", status: 201, job: true},
		"replayed":             {body: `{"command":"true","gpu_count":1}`, key: "k1", status: 201, job: true},
		"refused by the loop":  {body: `{"command":"true","gpu_count":99}`, status: 422, errCode: "invalid_field"},
		"refused by handler":   {body: `{"command":"true","user":"bob"}`, status: 403, errCode: "user_mismatch"},
		"refused by decoding":  {body: `{"command":`, status: 400, errCode: "malformed_json"},
		"accepted, no key":     {body: `{"command":"true","gpu_count":2}`, status: 201, job: true},
		"refused, bad command": {body: `{"command":""}`, status: 422, errCode: "invalid_field"},
	}
	// Run in a fixed order: "replayed" follows "accepted".
	order := []string{"accepted", "replayed", "refused by the loop", "refused by handler", "refused by decoding", "accepted, no key", "refused, bad command"}
	for _, name := range order {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+"/queue/submit", strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+nt.Secret)
			if c.key != "" {
				req.Header.Set("Idempotency-Key", c.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var j api.Job
			json.NewDecoder(resp.Body).Decode(&j)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			rid := resp.Header.Get("X-Request-Id")
			entries, err := st.Audit(ctx, store.AuditFilter{Action: "job.submit", Since: time.Now().Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			var mine []api.AuditEntry
			for _, e := range entries {
				if e.RequestID == rid {
					mine = append(mine, e)
				}
			}
			if len(mine) != 1 {
				t.Fatalf("%d audit rows for request %s, want 1: %+v", len(mine), rid, mine)
			}
			e := mine[0]
			if e.User != "alice" || e.Role != api.RoleUser || e.TokenID != nt.ID || e.Method != "POST" || e.Path != "/queue/submit" ||
				e.Remote != "127.0.0.1" || e.Status != c.status || e.Error != c.errCode || e.At.IsZero() {
				t.Errorf("audit row %+v; want alice's, status %d, error %q", e, c.status, c.errCode)
			}
			if !c.job {
				if e.Target != "" {
					t.Errorf("refused submission audited with target %q", e.Target)
				}
				return
			}
			if e.Target != j.ID || j.ID == "" {
				t.Errorf("audit target %q, job %q", e.Target, j.ID)
			}
			state, err := st.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, sj := range state.Jobs {
				found = found || sj.ID == j.ID && sj.State == api.StateQueued
			}
			if !found {
				t.Errorf("job %s acknowledged but not in the store", j.ID)
			}
		})
	}
}
