package server

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// agentAuth checks the join token agents present as a bearer token.
func (s *Server) agentAuth(r *http.Request) error {
	if s.agents == nil || s.join == "" {
		return &api.Error{Status: http.StatusForbidden, Code: "agents_disabled", Message: "this server takes no agents"}
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.join)) != 1 {
		return &api.Error{Status: http.StatusUnauthorized, Code: "bad_join_token",
			Message: "agents must present the server's join token (CORRAL_JOIN_TOKEN) as a bearer token"}
	}
	return nil
}

func (s *Server) agentRegister(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	var reg api.AgentRegistration
	if err := decode(r, &reg); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	cfg, err := s.agents.Register(r.Context(), reg, host)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, cfg)
}

func (s *Server) agentSync(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	var rep api.AgentReport
	if err := decode(r, &rep); err != nil {
		return err
	}
	work, err := s.agents.Sync(r.Context(), rep)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, work)
}

func (s *Server) agentLogs(w http.ResponseWriter, r *http.Request) error {
	if err := s.agentAuth(r); err != nil {
		return err
	}
	var c api.LogChunk
	if err := decode(r, &c); err != nil {
		return err
	}
	if err := s.o.WriteLog(c); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) nodeAction(w http.ResponseWriter, r *http.Request) error {
	a, err := s.o.SetNodeState(r.Context(), r.PathValue("node_id"), r.PathValue("action"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a)
}

func (s *Server) nodeHistory(w http.ResponseWriter, r *http.Request) error {
	since := time.Now().Add(-time.Hour)
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := parseSince(v, time.Now())
		if err != nil {
			return api.Invalid("since", "%s", err.Error())
		}
		since = t
	}
	h, err := s.o.History(r.PathValue("node_id"), since)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"node_id": r.PathValue("node_id"), "samples": h})
}
