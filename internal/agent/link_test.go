package agent

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// The HTTP link presents the join token, trusts exactly the CAs it is
// given over HTTPS, and maps the server's unknown_node answer to
// ErrUnknownNode so that the agent registers again.
func TestHTTPLinkTLSAndErrors(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "unauthorized", Message: "bad join token"}})
			return
		}
		switch r.URL.Path {
		case "/agent/v1/register":
			var reg api.AgentRegistration
			if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			json.NewEncoder(w).Encode(api.AgentConfig{NodeID: reg.NodeID, NodeTTL: 30})
		case "/agent/v1/sync":
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "unknown_node", Message: "register first"}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reg := api.AgentRegistration{NodeID: "n1", GPUs: []api.AgentGPU{}, Tasks: []api.TaskStatus{}}

	link, err := NewHTTPLink(srv.URL, "s3cret", caFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := link.Register(ctx, reg)
	if err != nil || cfg.NodeID != "n1" || cfg.NodeTTL.Duration().Seconds() != 30 {
		t.Fatalf("register over TLS with the CA: %+v, %v", cfg, err)
	}
	if _, err := link.Sync(ctx, api.AgentReport{NodeID: "n1"}); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("sync answered unknown_node: err %v; want ErrUnknownNode", err)
	}

	untrusting, _ := NewHTTPLink(srv.URL, "s3cret", "")
	if _, err := untrusting.Register(ctx, reg); err == nil {
		t.Error("register trusted a certificate no CA given vouches for")
	}
	wrong, _ := NewHTTPLink(srv.URL, "guess", caFile)
	var apiErr *api.Error
	if _, err := wrong.Register(ctx, reg); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("register with a wrong token: %v; want a 401 API error", err)
	}
	if _, err := NewHTTPLink(srv.URL, "s3cret", filepath.Join(t.TempDir(), "none.pem")); err == nil {
		t.Error("a missing --ca-file was accepted")
	}
}

// The agent id, which lets an agent take its node back, is readable by
// the agent's account alone, and stays the same across restarts.
func TestAgentIDIsPrivate(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{cfg: Config{StateDir: dir}}
	id, err := a.agentID()
	if err != nil || len(id) < 16 {
		t.Fatalf("agent id %q, %v", id, err)
	}
	path := filepath.Join(dir, "agent-id")
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("agent-id mode %v (%v); want 0600", st.Mode().Perm(), err)
	}
	os.Chmod(path, 0o644) // as an older agent left it
	again, err := a.agentID()
	if err != nil || again != id {
		t.Fatalf("agent id after a restart %q (%v); want %q", again, err, id)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("agent-id mode %v after a restart; want 0600", st.Mode().Perm())
	}
}
