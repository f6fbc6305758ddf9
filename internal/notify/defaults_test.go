package notify

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestPlanUserDefaults: a job with no notify field of its own goes by its
// user's own defaults when they have set some, else by the built-in ones;
// a job's own notify overrides both; array tasks and summaries likewise.
// ana's default is begin, dave's end, erin's none; bob has none.
func TestPlanUserDefaults(t *testing.T) {
	reg, _ := newTestRegistry(t)
	ctx := context.Background()
	eps := map[string]string{}
	for _, u := range []string{"ana", "bob", "dave", "erin"} {
		eps[u] = addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: u})
	}
	nlp := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeProject, Project: "nlp"})
	for u, n := range map[string]string{"ana": "begin", "dave": "end", "erin": "none"} {
		if _, err := reg.SetDefaults(ctx, u, n, "admin"); err != nil {
			t.Fatal(err)
		}
	}
	p := NewPlanner(reg, nil)
	at := time.Unix(2000, 0)
	short, long := 30.0, 3600.0
	job := func(user, notify string, k Kind, runtime float64) Event {
		return Event{Kind: k, At: at, Job: &JobInfo{ID: "j-" + user, User: user, Project: "nlp", RuntimeSeconds: runtime, notify: notify}}
	}
	task := func(user, notify string, k Kind, tasks bool) Event {
		ev := job(user, notify, k, short)
		ev.Job.ArrayJobID, ev.Job.notifyTasks = "a1", tasks
		return ev
	}
	array := func(user, notify string) Event {
		return ArrayEvent(&ArrayInfo{ID: "a1", User: user, Project: "nlp", Tasks: 3}, notify, at)
	}
	cases := []struct {
		name string
		ev   Event
		want string // whose endpoints get it (with the project's); "" none
	}{
		{"ana's begin, her default", job("ana", "", JobBegan, short), "ana"},
		{"ana's failure, her default says begin only", job("ana", "", JobFailed, short), ""},
		{"ana's failure, the job's own fail overrides", job("ana", "fail", JobFailed, short), "ana"},
		{"ana's begin, the job's own none overrides", job("ana", "none", JobBegan, short), ""},
		{"bob's begin, built-in", job("bob", "", JobBegan, short), ""},
		{"bob's failure, built-in", job("bob", "", JobFailed, short), "bob"},
		{"bob's short completion, built-in", job("bob", "", JobCompleted, short), ""},
		{"bob's long completion, built-in", job("bob", "", JobCompleted, long), "bob"},
		{"dave's short completion, his default end: every end", job("dave", "", JobCompleted, short), "dave"},
		{"dave's preemption, his default end", job("dave", "", JobPreempted, short), ""},
		{"erin's failure, her default none", job("erin", "", JobFailed, long), ""},
		{"erin's failure, the job's own all", job("erin", "all", JobFailed, long), "erin"},
		{"ana's array summary, her default begin", array("ana", ""), ""},
		{"ana's array summary, the array's own end", array("ana", "end"), "ana"},
		{"dave's array summary, his default end", array("dave", ""), "dave"},
		{"bob's array summary, built-in", array("bob", ""), "bob"},
		{"ana's task fails, her default begin", task("ana", "", JobFailed, false), ""},
		{"ana's task begins, notify_tasks, her default", task("ana", "", JobBegan, true), "ana"},
		{"ana's task begins, no notify_tasks", task("ana", "", JobBegan, false), ""},
		{"bob's task fails, built-in", task("bob", "", JobFailed, false), "bob"},
	}
	for _, c := range cases {
		var got []string
		for _, it := range p.Plan([]Event{c.ev}) {
			got = append(got, it.EndpointID)
		}
		var want []string
		if c.want != "" {
			want = []string{eps[c.want], nlp}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: routed to %v, want %v", c.name, got, want)
		}
	}
}

// TestSetDefaults: a bad value is a 422 naming notify and changes nothing;
// values are normalized; default goes back to the built-in ones; what is
// set is in the store and a registry loaded from it has it.
func TestSetDefaults(t *testing.T) {
	reg, st := newTestRegistry(t)
	ctx := context.Background()
	if d := reg.Defaults("ana"); !d.Builtin || d.Notify != "" || d.User != "ana" {
		t.Fatalf("before any: %+v", d)
	}
	d, err := reg.SetDefaults(ctx, "ana", " End,begin ", "ana")
	if err != nil || d.Notify != "begin,end" || d.Builtin || d.UpdatedBy != "ana" || d.UpdatedAt == nil {
		t.Fatalf("set: %+v %v", d, err)
	}
	for _, bad := range []string{"", "  ", "begin,sometimes", "all,begin", "none,end", "defaults"} {
		_, err := reg.SetDefaults(ctx, "ana", bad, "ana")
		if e := api.AsError(err); e == nil || e.Status != 422 || e.Field != "notify" {
			t.Errorf("SetDefaults(%q): %v, want a 422 naming notify", bad, err)
		}
	}
	if got := reg.Defaults("ana").Notify; got != "begin,end" {
		t.Errorf("after bad values: %q", got)
	}
	if _, err := reg.SetDefaults(ctx, "bob", "none", "root"); err != nil {
		t.Fatal(err)
	}
	seal, _ := NewSealer(make([]byte, 32))
	again, err := NewRegistry(ctx, st, seal, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := again.Defaults("ana"), again.Defaults("bob"); a.Notify != "begin,end" || b.Notify != "none" || b.UpdatedBy != "root" {
		t.Errorf("reloaded: %+v %+v", a, b)
	}
	if d, err := again.SetDefaults(ctx, "ana", "Default", "ana"); err != nil || !d.Builtin || d.Notify != "" {
		t.Fatalf("reset: %+v %v", d, err)
	}
	if recs, _ := st.NotifyDefaults(ctx); len(recs) != 1 || recs[0].User != "bob" {
		t.Errorf("stored after ana's reset: %+v", recs)
	}
}
