package deps

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/featuretest"
)

// TestOpsSet changes a queued job's depends_on through a fake loop: the
// job's row is touched and a cycle asked for only when it changed; a
// job that is not queued, an unknown one and a bad expression are
// refused, changing nothing.
func TestOpsSet(t *testing.T) {
	cases := []struct {
		name, id, raw string
		status        int // the error's; 0: none
		dependsOn     string
		touched       int
	}{
		{"set", "jq", "afterok:jdone1", 0, "afterok:jdone1", 1},
		{"same", "jdep", "afterok:jdone1", 0, "afterok:jdone1", 0},
		{"removed", "jdep", "", 0, "", 1},
		{"running", "jrun", "afterok:jdone1", 409, "", 0},
		{"unknown", "jnope", "afterok:jdone1", 404, "", 0},
		{"bad", "jq", "sometime:jdone1", 422, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			tr := f.tracker(0)
			f.add("jdone1", api.StateCompleted, "")
			f.add("jq", api.StateQueued, "")
			dep := f.add("jdep", api.StateQueued, "afterok:jdone1")
			if err := tr.Set(dep, dep.DependsOn, false); err != nil {
				t.Fatal(err)
			}
			f.add("jrun", api.StateRunning, "")
			l := &featuretest.Loop{Now: t0}
			v, err := Ops{Tracker: tr, Loop: l, View: func(j *api.Job) api.Job { return *j }}.Set(context.Background(), c.id, c.raw)
			var ae *api.Error
			if c.status == 0 && err != nil || c.status != 0 && (!errors.As(err, &ae) || ae.Status != c.status) {
				t.Fatalf("error %v, want status %d", err, c.status)
			}
			if len(l.Touched) != c.touched || l.Replans != c.touched {
				t.Fatalf("touched %v, replans %d; want %d", l.Touched, l.Replans, c.touched)
			}
			if err == nil && (v.ID != c.id || v.DependsOn != c.dependsOn) {
				t.Fatalf("answered %s depends_on %q, want %s %q", v.ID, v.DependsOn, c.id, c.dependsOn)
			}
			if j := f.jobs[c.id]; err != nil && j != nil && j.DependsOn != map[string]string{"jdep": "afterok:jdone1"}[c.id] {
				t.Fatalf("a refused change changed %s: %q", c.id, j.DependsOn)
			}
		})
	}
}
