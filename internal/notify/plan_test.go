package notify

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestWants(t *testing.T) {
	short, long := time.Minute, 11*time.Minute
	cases := []struct {
		notify  string
		kind    Kind
		runtime time.Duration
		want    bool
	}{
		{"", JobFailed, short, true},
		{"", JobPreempted, short, true},
		{"", JobLost, short, true},
		{"", JobTimeLimitWarning, short, true},
		{"", JobCompleted, short, false},
		{"", JobCompleted, long, true},
		{"", JobCanceled, long, true},
		{"", JobBegan, long, false},
		{"", ArrayFinished, 0, true},
		{"none", JobFailed, long, false},
		{"all", JobBegan, short, true},
		{"begin", JobBegan, short, true},
		{"begin", JobFailed, short, false},
		{"end", JobCompleted, short, true},
		{"end", JobFailed, short, true},
		{"end", JobPreempted, short, false},
		{"fail", JobCompleted, long, false},
		{"fail", JobDependencyNever, short, true},
		{"preempt", JobIdle, short, true},
		{"begin,end", JobCanceled, short, true},
		{"all", Kind("alert.node_down"), 0, false},
	}
	for _, c := range cases {
		if got := Wants(c.notify, c.kind, c.runtime); got != c.want {
			t.Errorf("Wants(%q, %s, %s) = %v, want %v", c.notify, c.kind, c.runtime, got, c.want)
		}
	}
}

func TestFromTransition(t *testing.T) {
	code := 3
	started := time.Unix(1000, 0)
	finished := started.Add(90 * time.Second)
	j := &api.Job{ID: "j1", Name: "train", User: "ana", Project: "nlp", GPUCount: 2, Nodes: 1, ExitCode: &code, StartedAt: &started, FinishedAt: &finished,
		Env: map[string]string{"HF_TOKEN": "secret-value"}, Allocation: []api.Allocation{{NodeID: "n1"}, {NodeID: "n1"}}}
	cases := []struct {
		e    api.Event
		want Kind
	}{
		{api.Event{From: api.StateAllocating, To: api.StateRunning, Reason: api.ReasonStarted}, JobBegan},
		{api.Event{From: api.StateRunning, To: api.StateCompleted, Reason: api.ReasonExited}, JobCompleted},
		{api.Event{From: api.StateRunning, To: api.StateFailed, Reason: api.ReasonExitCode}, JobFailed},
		{api.Event{From: api.StateRunning, To: api.StateCanceled, Reason: api.ReasonCanceled}, JobCanceled},
		{api.Event{From: api.StateRunning, To: api.StateQueued, Reason: api.ReasonPreempted}, JobPreempted},
		{api.Event{From: api.StateRunning, To: api.StateQueued, Reason: api.ReasonNodeLost}, JobLost},
		{api.Event{From: api.StateQueued, To: api.StateFailed, Reason: ReasonDependencyNeverSatisfied}, JobDependencyNever},
		{api.Event{From: api.StateQueued, To: api.StateScheduled, Reason: api.ReasonScheduled}, ""},
		{api.Event{To: api.StateQueued, Reason: api.ReasonSubmitted}, ""},
	}
	for _, c := range cases {
		ev, ok := FromTransition(j, c.e)
		if ok != (c.want != "") || ev.Kind != c.want {
			t.Errorf("%s -> %s (%s): got %q %v, want %q", c.e.From, c.e.To, c.e.Reason, ev.Kind, ok, c.want)
			continue
		}
		if !ok {
			continue
		}
		b, _ := json.Marshal(ev)
		if ev.Job.GPUs != 2 || ev.Job.RuntimeSeconds != 90 || !slices.Equal(ev.Job.Nodes, []string{"n1"}) || strings.Contains(string(b), "secret-value") {
			t.Errorf("%s: %s", c.want, b)
		}
	}
}

// newTestRegistry is a registry over the in-memory store.
func newTestRegistry(t *testing.T) (*Registry, *MemStore) {
	t.Helper()
	st := &MemStore{}
	seal, err := NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(context.Background(), st, seal, nil)
	if err != nil {
		t.Fatal(err)
	}
	return reg, st
}

func addEP(t *testing.T, reg *Registry, req api.EndpointRequest) string {
	t.Helper()
	if req.Kind == "" {
		req.Kind, req.URL = api.EndpointSlack, "https://hooks.example.com/x"
	}
	e, err := reg.Add(context.Background(), req, "test")
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// TestPlanRoutes: a job's events go to its user's and project's endpoints
// when the job wants them; an array task's only when it failed (or with
// notify_tasks); alerts to the cluster's.
func TestPlanRoutes(t *testing.T) {
	reg, _ := newTestRegistry(t)
	ana := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: "ana"})
	nlp := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeProject, Project: "nlp"})
	bob := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: "bob"})
	cluster := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeCluster})
	p := NewPlanner(reg, nil)
	at := time.Unix(2000, 0)
	job := func(notify string, array string, tasks bool) *api.Job {
		return &api.Job{ID: "j1", User: "ana", Project: "nlp", Notify: notify, ArrayJobID: array, NotifyTasks: tasks}
	}
	ev := func(j *api.Job, to api.State, reason string) Event {
		e, ok := FromTransition(j, api.Event{At: at, From: api.StateRunning, To: to, Reason: reason})
		if !ok {
			t.Fatalf("%s is no event", to)
		}
		return e
	}
	cases := map[string]struct {
		ev   Event
		want []string
	}{
		"failure, defaults":          {ev(job("", "", false), api.StateFailed, api.ReasonExitCode), []string{ana, nlp}},
		"short completion, defaults": {ev(job("", "", false), api.StateCompleted, api.ReasonExited), nil},
		"completion, end":            {ev(job("end", "", false), api.StateCompleted, api.ReasonExited), []string{ana, nlp}},
		"failure, none":              {ev(job("none", "", false), api.StateFailed, api.ReasonExitCode), nil},
		"array task completes":       {ev(job("all", "a1", false), api.StateCompleted, api.ReasonExited), nil},
		"array task fails":           {ev(job("", "a1", false), api.StateFailed, api.ReasonExitCode), []string{ana, nlp}},
		"array task, notify_tasks":   {ev(job("all", "a1", true), api.StateCompleted, api.ReasonExited), []string{ana, nlp}},
		"array summary":              {ArrayEvent(&ArrayInfo{ID: "a1", User: "ana", Project: "nlp", Tasks: 3}, "", at), []string{ana, nlp}},
		"array summary, notify none": {ArrayEvent(&ArrayInfo{ID: "a1", User: "ana", Project: "nlp", Tasks: 3}, "none", at), nil},
		"alert":                      {Event{Kind: AlertNodeDown, At: at, Alert: &Alert{Node: "n1", Message: "down"}}, []string{cluster}},
	}
	for name, c := range cases {
		var got []string
		for _, it := range p.Plan([]Event{c.ev}) {
			got = append(got, it.EndpointID)
			if it.Kind != string(c.ev.Kind) || !it.CreatedAt.Equal(at) || it.State != "pending" {
				t.Errorf("%s: row %+v", name, it)
			}
		}
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: routed to %v, want %v", name, got, want)
		}
		if slices.Contains(got, bob) {
			t.Errorf("%s: bob's endpoint got ana's event", name)
		}
	}
}

// TestRegistrySealsSecrets: the store holds no URL, secret or address in
// the clear, and a registry loaded from it with the same key has them.
func TestRegistrySealsSecrets(t *testing.T) {
	reg, st := newTestRegistry(t)
	const url, secret = "https://hooks.example.com/T0/PATHSECRET", "whsec-abcdefgh"
	id := addEP(t, reg, api.EndpointRequest{Kind: api.EndpointWebhook, URL: url, Secret: secret, Scope: api.ScopeUser, User: "ana"})
	addr := addEP(t, reg, api.EndpointRequest{Kind: api.EndpointEmail, Address: "ana.lovelace@example.com", Scope: api.ScopeUser, User: "ana"})
	recs, _ := st.Endpoints(context.Background())
	for _, r := range recs {
		for _, s := range []string{"PATHSECRET", secret, "lovelace"} {
			if strings.Contains(r.Data, s) {
				t.Errorf("the store holds %q in the clear: %s", s, r.Data)
			}
		}
	}
	seal, _ := NewSealer(make([]byte, 32))
	again, err := NewRegistry(context.Background(), st, seal, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tg, ok := again.target(id); !ok || tg.URL != url || tg.Secret != secret {
		t.Errorf("reloaded: %+v", tg)
	}
	if pub, _ := again.Get(addr); pub.Target != "a…@example.com" {
		t.Errorf("an address is listed as %q", pub.Target)
	}
	// Under another key the endpoints are listed unreadable, routed
	// nothing, and can be removed.
	other, _ := NewSealer(append(make([]byte, 31), 1))
	broken, err := NewRegistry(context.Background(), st, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pub, _ := broken.Get(id); pub.Target != Unreadable || broken.Broken() != 2 {
		t.Errorf("under another key: %+v, %d broken", pub, broken.Broken())
	}
	if _, ok := broken.target(id); ok || len(broken.route("ana", "", false)) != 0 {
		t.Errorf("an unreadable endpoint is delivered to")
	}
	if err := broken.Remove(context.Background(), id); err != nil {
		t.Errorf("remove an unreadable endpoint: %v", err)
	}
}

// TestRegistryLimit: an owner has at most maxPerOwner endpoints per scope;
// the one past it is refused (409) and not stored.
func TestRegistryLimit(t *testing.T) {
	reg, st := newTestRegistry(t)
	for range maxPerOwner {
		addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: "ana"})
	}
	_, err := reg.Add(context.Background(), api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/x", Scope: api.ScopeUser, User: "ana"}, "ana")
	if e := api.AsError(err); e == nil || e.Status != 409 {
		t.Fatalf("the endpoint past the limit: %v", err)
	}
	addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: "bob"}) // another owner is not held back
	if recs, _ := st.Endpoints(context.Background()); len(recs) != maxPerOwner+1 {
		t.Errorf("%d stored", len(recs))
	}
}
