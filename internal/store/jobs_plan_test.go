package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestJobsQueryPlans: every page of ended jobs GET /jobs asks walks an
// index in id order and stops at its limit. It used to search
// jobs_by_state and sort every ended job in a temporary B-tree, reading
// each one's JSON: ?limit=10 took 5 s over 57,000 ended jobs.
func TestJobsQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ended := []api.State{api.StateCompleted, api.StateFailed, api.StateCanceled}
	for name, c := range map[string]struct {
		q     JobQuery
		index string
	}{
		"ended":               {JobQuery{States: ended, Limit: 10}, "jobs_ended"},
		"ended, skip arrays":  {JobQuery{States: ended, Limit: 10, SkipArrays: []string{"a", "b"}}, "jobs_ended"},
		"ended, after cursor": {JobQuery{States: ended, Limit: 10, Before: "j1", SkipArrays: []string{"a"}}, "jobs_ended"},
		"one state":           {JobQuery{States: []api.State{api.StateFailed}, Limit: 10, SkipArrays: []string{"a"}}, "jobs_ended"},
		"since":               {JobQuery{States: ended, Since: time.Unix(1e9, 0), Limit: 10}, "jobs_ended"},
		"until":               {JobQuery{States: ended, Until: time.Unix(2e9, 0), Limit: 10}, "jobs_ended"},
		"user":                {JobQuery{States: ended, User: "u", Limit: 10, SkipArrays: []string{"a"}}, "jobs_by_user"},
		"project":             {JobQuery{States: ended, Project: "p", Limit: 10}, "jobs_by_project"},
		"name":                {JobQuery{States: ended, Name: "n", Limit: 10}, "jobs_by_name"},
		"any state":           {JobQuery{Limit: 10}, ""},
		"live state, user":    {JobQuery{States: []api.State{api.StateRunning}, User: "u", Limit: 10}, "jobs_by_user"},
	} {
		t.Run(name, func(t *testing.T) {
			query, args := jobsQuery(c.q, false)
			var plan []string
			err := s.read(ctx, "EXPLAIN QUERY PLAN "+query, args, func(r *sql.Rows) error {
				var id, parent, unused int
				var detail string
				if err := r.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(plan, "; ")
			if strings.Contains(all, "TEMP B-TREE") || !strings.Contains(all, "USING") || !strings.Contains(all, c.index) {
				t.Errorf("%s\nplan: %s; want %s in id order, no sort", query, all, c.index)
			}
		})
	}
}
