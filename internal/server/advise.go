package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/advise"
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// AdviseSource reads the history `corral advise` profiles (store.Store).
type AdviseSource interface {
	Runs(ctx context.Context, since, until time.Time) ([]store.Run, error)
}

// WithAdvise serves GET /advise from src.
func WithAdvise(src AdviseSource) Option {
	return func(s *Server) { s.advise = src }
}

// defaultAdviseSince is how far back GET /advise looks without since.
const defaultAdviseSince = 30 * 24 * time.Hour

// adviseProfile is GET /advise?since=30d: the load profile of the period
// (since: a duration back from now, in days "30d" or as "720h", or an
// RFC 3339 time), with the cluster's GPUs by model.
func (s *Server) adviseProfile(w http.ResponseWriter, r *http.Request) error {
	if s.advise == nil {
		return &api.Error{Status: http.StatusServiceUnavailable, Code: "advise_off", Message: "this server keeps no history to advise from"}
	}
	now := time.Now()
	since := now.Add(-defaultAdviseSince)
	if v := r.URL.Query().Get("since"); v != "" {
		var err error
		if since, err = parseSinceDays(v, now); err != nil {
			return api.Invalid("since", "%s", err.Error())
		}
	}
	if !since.Before(now) {
		return api.Invalid("since", "must be in the past")
	}
	held, err := s.advise.Runs(r.Context(), since, now)
	if err != nil {
		return err
	}
	runs := make([]advise.Run, len(held))
	for i, h := range held {
		runs[i] = advise.Run(h)
	}
	cluster := map[string]int{}
	for _, n := range s.o.Cluster(r.Context()).Nodes {
		for _, g := range n.GPUs {
			if !g.Simulated || g.Model != "" {
				cluster[g.Model]++
			}
		}
	}
	return writeJSON(w, http.StatusOK, advise.Profile(runs, since, now, cluster))
}

// parseSinceDays is parseSince that also takes whole days ("30d").
func parseSinceDays(v string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 || n > 3660 {
			return time.Time{}, &api.Error{Message: "days must be a whole number from 1 to 3660 (30d)"}
		}
		return now.AddDate(0, 0, -n), nil
	}
	return parseSince(v, now)
}
