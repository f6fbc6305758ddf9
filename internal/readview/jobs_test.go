package readview

import (
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

func TestJobFilterMatch(t *testing.T) {
	at := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	j := &api.Job{ID: "05", State: api.StateQueued, User: "ana", Project: "p", Name: "fit", SubmittedAt: at}
	tests := []struct {
		name string
		f    JobFilter
		want bool
	}{
		{"zero matches all", JobFilter{}, true},
		{"cursor after", JobFilter{Cursor: "06"}, true},
		{"cursor at: the next page starts below it", JobFilter{Cursor: "05"}, false},
		{"state", JobFilter{State: api.StateRunning}, false},
		{"user", JobFilter{User: "bo"}, false},
		{"project", JobFilter{Project: "p"}, true},
		{"name exactly", JobFilter{Name: "fi"}, false},
		{"since is inclusive", JobFilter{Since: at}, true},
		{"since later", JobFilter{Since: at.Add(time.Second)}, false},
		{"until is exclusive", JobFilter{Until: at}, false},
		{"until later", JobFilter{Until: at.Add(time.Second)}, true},
	}
	for _, tc := range tests {
		if got := tc.f.Match(j); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLive(t *testing.T) {
	j := &api.Job{ID: "1", Env: map[string]string{"A": "1"}, Events: []api.Event{{To: api.StateQueued}}}
	tests := []struct {
		withEvents bool
		events     int
	}{{false, 0}, {true, 1}}
	for _, tc := range tests {
		v := Live(j, "fair-share", tc.withEvents)
		if len(v.Events) != tc.events || v.Policy != "fair-share" || v.Allocation == nil {
			t.Errorf("withEvents %v: events %d policy %q allocation %v; want %d events, the policy, an empty allocation", tc.withEvents, len(v.Events), v.Policy, v.Allocation, tc.events)
		}
		v.Env["A"] = "2"
		if tc.withEvents {
			v.Events[0].To = api.StateFailed
		}
		if j.Env["A"] != "1" || j.Events[0].To != api.StateQueued {
			t.Errorf("withEvents %v: the copy shares the job's env or events", tc.withEvents)
		}
	}
}

func TestPending(t *testing.T) {
	tests := []struct {
		name                  string
		reason                string
		stopped               bool
		wantReason, wantCause string
	}{
		{"a reason kept", "resources", false, "resources", "resources"},
		{"stopped wins", "resources", true, SchedulingStopped, SchedulingStopped},
		{"a split reason: the old one for old clients", api.ReasonBooking, false, api.ReasonReservation, api.ReasonBooking},
	}
	for _, tc := range tests {
		v := &api.Job{PendingReason: tc.reason, PendingMessage: "m"}
		Pending(v, tc.stopped)
		if v.PendingReason != tc.wantReason || v.PendingCause != tc.wantCause || (tc.stopped && v.PendingMessage == "m") {
			t.Errorf("%s: reason %q cause %q message %q; want %q %q", tc.name, v.PendingReason, v.PendingCause, v.PendingMessage, tc.wantReason, tc.wantCause)
		}
	}
}

func TestByID(t *testing.T) {
	jobs := []api.Job{{ID: "03"}, {ID: "01"}, {ID: "02"}}
	ByID(jobs)
	if jobs[0].ID != "01" || jobs[1].ID != "02" || jobs[2].ID != "03" {
		t.Errorf("order %v, want by id", jobs)
	}
}
