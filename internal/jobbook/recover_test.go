package jobbook

import (
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

func gpus(node string, ids ...int) []api.Allocation {
	out := []api.Allocation{}
	for _, i := range ids {
		out = append(out, api.Allocation{NodeID: node, GPUID: i})
	}
	return out
}

func TestRecovered(t *testing.T) {
	for _, c := range []struct {
		name     string
		job      api.Job
		canAdopt bool
		only     string
		want     Fate
	}{
		{"queued", api.Job{State: api.StateQueued}, true, "", Queue},
		{"a queued hold", api.Job{State: api.StateQueued, Hold: "h1", GPUCount: 1}, true, "", Queue},
		{"completed", api.Job{State: api.StateCompleted, Allocation: gpus("n1", 0)}, true, "", Stays},
		{"failed", api.Job{State: api.StateFailed}, true, "n1", Stays},
		{"canceled", api.Job{State: api.StateCanceled}, false, "", Stays},
		{"running on GPUs", api.Job{State: api.StateRunning, GPUCount: 1, Allocation: gpus("n1", 0)}, true, "", Adopt},
		{"scheduled on GPUs", api.Job{State: api.StateScheduled, GPUCount: 2, Allocation: gpus("n1", 0, 1)}, true, "", Adopt},
		{"a booking's job", api.Job{State: api.StateRunning, GPUCount: 1, Allocation: gpus("n1", 3), Reservation: "b1"}, true, "", Adopt},
		{"past its limit, being stopped", api.Job{State: api.StateRunning, GPUCount: 1, Allocation: gpus("n1", 0), TimedOut: true}, true, "", Adopt},
		{"running, executor cannot adopt", api.Job{State: api.StateRunning, GPUCount: 1, Allocation: gpus("n1", 0)}, false, "", Lost},
		{"GPUs but no allocation stored", api.Job{State: api.StateAllocating, GPUCount: 1}, true, "n1", Lost},
		{"no GPUs, its node stored", api.Job{State: api.StateRunning, NodeID: "n2"}, true, "", Adopt},
		{"no GPUs, one node", api.Job{State: api.StateRunning}, true, "n1", Adopt},
		{"no GPUs, no node known", api.Job{State: api.StateRunning}, true, "", Lost},
		{"no GPUs, node stored, cannot adopt", api.Job{State: api.StateRunning, NodeID: "n2"}, false, "n2", Lost},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Recovered(&c.job, c.canAdopt, c.only); got != c.want {
				t.Errorf("Recovered = %d, want %d", got, c.want)
			}
		})
	}
}

func TestPlacements(t *testing.T) {
	for _, c := range []struct {
		name string
		job  api.Job
		only string
		want []sched.Placement
	}{
		{"its GPUs", api.Job{Allocation: gpus("n1", 2, 3), NodeID: "n1"}, "n9", []sched.Placement{{NodeID: "n1", GPUs: []int{2, 3}}}},
		{"no GPUs: its node", api.Job{Allocation: []api.Allocation{}, NodeID: "n2"}, "n9", []sched.Placement{{NodeID: "n2", GPUs: []int{}}}},
		{"no GPUs, no node: the one node", api.Job{Allocation: []api.Allocation{}}, "n9", []sched.Placement{{NodeID: "n9", GPUs: []int{}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Placements(&c.job, c.only)
			if len(got) != len(c.want) {
				t.Fatalf("Placements = %+v, want %+v", got, c.want)
			}
			for i := range got {
				if got[i].NodeID != c.want[i].NodeID || !slices.Equal(got[i].GPUs, c.want[i].GPUs) {
					t.Errorf("Placements = %+v, want %+v", got, c.want)
				}
			}
		})
	}
}

func TestLostWithServer(t *testing.T) {
	for _, c := range []struct {
		name string
		job  api.Job
		want Settle
	}{
		{"past its limit", api.Job{State: api.StateRunning, TimedOut: true, MaxRetries: 3},
			Settle{State: api.StateFailed, Reason: api.ReasonTimeLimit, Ended: true,
				Detail: "ran past its time limit; the server stopped while it was being stopped"}},
		{"being canceled", api.Job{State: api.StateRunning, CancelRequested: true, MaxRetries: 3},
			Settle{State: api.StateCanceled, Reason: api.ReasonCanceled, Ended: true,
				Detail: "the server stopped while the job was being canceled"}},
		{"retries left", api.Job{State: api.StateRunning, RetryCount: 1, MaxRetries: 3},
			Settle{State: api.StateQueued, Reason: api.ReasonLost, Retry: true, Reset: true,
				Detail: "the server stopped while the job was running; requeued (retry 2 of 3)"}},
		{"preemptions do not count", api.Job{State: api.StateScheduled, RetryCount: 2, Preemptions: 2, MaxRetries: 1},
			Settle{State: api.StateQueued, Reason: api.ReasonLost, Retry: true, Reset: true,
				Detail: "the server stopped while the job was scheduled; requeued (retry 1 of 1)"}},
		{"no retries left", api.Job{State: api.StateAllocating, RetryCount: 1, MaxRetries: 1},
			Settle{State: api.StateFailed, Reason: api.ReasonLost, Ended: true,
				Detail: "the server stopped while the job was allocating; no retries left (max_retries 1)"}},
		{"a booking's job, no retries", api.Job{State: api.StateRunning, Reservation: "b1"},
			Settle{State: api.StateFailed, Reason: api.ReasonLost, Ended: true,
				Detail: "the server stopped while the job was running; no retries left (max_retries 0)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := c.job
			if got := LostWithServer(&c.job); got != c.want {
				t.Errorf("LostWithServer =\n %+v, want\n %+v", got, c.want)
			}
			if c.job.RetryCount != before.RetryCount || c.job.State != before.State {
				t.Errorf("LostWithServer changed the job: %+v", c.job)
			}
		})
	}
}

func TestUnstarted(t *testing.T) {
	for _, c := range []struct {
		name   string
		job    api.Job
		ok     bool
		detail string
	}{
		{"scheduled", api.Job{State: api.StateScheduled}, true, "its node came back without it while it was scheduled (it never started); requeued without counting a retry"},
		{"allocating", api.Job{State: api.StateAllocating}, true, "its node came back without it while it was allocating (it never started); requeued without counting a retry"},
		{"running", api.Job{State: api.StateRunning}, false, ""},
		{"being canceled", api.Job{State: api.StateScheduled, CancelRequested: true}, false, ""},
		{"past its limit", api.Job{State: api.StateAllocating, TimedOut: true}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ok := Unstarted(&c.job)
			if ok != c.ok {
				t.Fatalf("Unstarted ok = %v, want %v", ok, c.ok)
			}
			want := Settle{}
			if ok {
				want = Settle{State: api.StateQueued, Reason: api.ReasonRequeued, Reset: true, Detail: c.detail}
			}
			if s != want {
				t.Errorf("Unstarted = %+v, want %+v", s, want)
			}
		})
	}
}

func TestLearn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start, end := t0, t0.Add(time.Hour)
	jobs := []*api.Job{
		{User: "ann", Project: "p", State: api.StateCompleted, GPUSeconds: 3600, StartedAt: &start, FinishedAt: &end,
			Events: []api.Event{{At: end}}},
		{User: "bob", Project: "p", State: api.StateRunning, GPUSeconds: 7200, StartedAt: &start, Events: []api.Event{{At: end}}},
		{User: "cy", Project: "p", State: api.StateQueued, GPUSeconds: 0},
	}
	l, e := sched.NewLedger(time.Hour), sched.NewEstimator()
	Learn(slices.Values(jobs), l, e)
	u := l.Usage(end)
	if u.Users["ann"] <= 0 || u.Users["bob"] <= u.Users["ann"] || u.Users["cy"] != 0 {
		t.Errorf("ledger's usage = %+v, want ann > 0, bob > ann, cy 0", u.Users)
	}
	if d, ok := e.Estimate("ann"); !ok || d != time.Hour {
		t.Errorf("ann's estimate = %v %v, want 1h", d, ok)
	}
	if _, ok := e.Estimate("bob"); ok {
		t.Errorf("bob has an estimate, but no job of his completed")
	}
}

func TestLostAttempt(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                        string
		retries, preemptions, maxed int
		requeue                     bool
		wait                        time.Duration
		msg                         string
	}{
		{"first loss", 0, 0, 3, true, 10 * time.Second, "node gone; requeued (retry 1 of 3) to start no sooner than in 10s"},
		{"second loss: the wait doubles", 1, 0, 3, true, 20 * time.Second, "node gone; requeued (retry 2 of 3) to start no sooner than in 20s"},
		{"preemptions do not count", 3, 2, 3, true, 20 * time.Second, "node gone; requeued (retry 2 of 3) to start no sooner than in 20s"},
		{"the wait is capped", 7, 0, 10, true, BackoffMax, "node gone; requeued (retry 8 of 10) to start no sooner than in 10m0s"},
		{"no retries left", 3, 0, 3, false, 0, "node gone; no retries left (max_retries 3)"},
		{"no retries at all", 0, 0, 0, false, 0, "node gone; no retries left (max_retries 0)"},
	} {
		j := api.Job{RetryCount: tc.retries, Preemptions: tc.preemptions, MaxRetries: tc.maxed}
		s := LostAttempt(&j, "node gone", api.ReasonNodeLost, 10*time.Second, now)
		want := Settle{State: api.StateFailed, Reason: api.ReasonNodeLost, Ended: true, Detail: tc.msg}
		if tc.requeue {
			want = Settle{State: api.StateQueued, Reason: api.ReasonNodeLost, Retry: true, NotBefore: now.Add(tc.wait), Reset: true, Detail: tc.msg}
		}
		if s != want {
			t.Errorf("%s: %+v, want %+v", tc.name, s, want)
		}
	}
}
