package runtimes

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

type fakeCluster struct{}

func (fakeCluster) GPUModel(node string, gpu int) string { return "NVIDIA H100 80GB HBM3" }

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func fallback(string) (time.Duration, string) { return time.Hour, BasisFallback }

// job is a job of ana's named name that started at t0 and ended after
// ran (state and finish set by end).
func job(id, name string, ran time.Duration) *api.Job {
	start, end := t0, t0.Add(ran)
	return &api.Job{ID: id, User: "ana", Project: "vision", Name: name, Command: "python train.py", GPUCount: 4, Nodes: 1,
		StartedAt: &start, FinishedAt: &end, State: api.StateCompleted,
		Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}, {NodeID: "n1", GPUID: 2}, {NodeID: "n1", GPUID: 3}}}
}

func ended(b *Book, j *api.Job, reason string) *featuretest.Tx {
	tx := &featuretest.Tx{At: *j.FinishedAt}
	b.Moved(tx, j, api.Event{At: tx.At, From: api.StateRunning, To: j.State, Reason: reason})
	return tx
}

// Which endings are runs: those whose process ended on its own or at its
// time limit; each writes one row in the transaction that ends it.
func TestMovedWritesRunsThatCount(t *testing.T) {
	for _, c := range []struct {
		reason string
		from   api.State
		want   bool
	}{
		{api.ReasonExited, api.StateRunning, true},
		{api.ReasonExitCode, api.StateRunning, true},
		{api.ReasonOutOfMemory, api.StateRunning, true},
		{api.ReasonTimeLimit, api.StateRunning, true},
		{api.ReasonCanceled, api.StateRunning, false},
		{api.ReasonPreempted, api.StateRunning, false},
		{api.ReasonNodeLost, api.StateRunning, false},
		{api.ReasonIdle, api.StateRunning, false},
		{api.ReasonStartFailed, api.StateAllocating, false},
	} {
		t.Run(c.reason, func(t *testing.T) {
			b := New(fakeCluster{})
			j := job("j1", "resnet-sweep", 40*time.Minute)
			j.TimeLimit = secs(2 * time.Hour)
			tx := &featuretest.Tx{At: *j.FinishedAt}
			b.Moved(tx, j, api.Event{At: tx.At, From: c.from, To: api.StateFailed, Reason: c.reason})
			if got := len(tx.B.Runs) == 1; got != c.want {
				t.Fatalf("rows %+v; want a row: %v", tx.B.Runs, c.want)
			}
			if !c.want {
				return
			}
			r := tx.B.Runs[0]
			want := store.RunRow{JobID: "j1", User: "ana", Project: "vision", Name: "resnet-sweep", CommandFP: Fingerprint(j), GPUs: 4,
				GPUModel: "NVIDIA H100 80GB HBM3", TimeLimit: 2 * time.Hour, Ran: 40 * time.Minute, EndedAt: *j.FinishedAt, Outcome: c.reason}
			if r != want {
				t.Errorf("row %+v; want %+v", r, want)
			}
			if len(r.CommandFP) != 16 || strings.Contains(r.CommandFP, "python") {
				t.Errorf("fingerprint %q; want 16 hex digits, not the command", r.CommandFP)
			}
		})
	}
}

// Estimates: given first, then learned once a key has enough runs (the
// high end for the core, with its point, low end and basis), then the
// fallback; the time limit caps every one; a running job that has
// outlived its estimate gets a new one.
func TestEstimator(t *testing.T) {
	b := New(fakeCluster{})
	for i, ran := range []time.Duration{30 * time.Minute, 40 * time.Minute, 50 * time.Minute} {
		ended(b, job(string(rune('a'+i)), "resnet-sweep", ran), api.ReasonExited)
	}
	queued := func(name string, mod func(*api.Job)) *api.Job {
		j := &api.Job{ID: "q", User: "ana", Name: name, Command: "python train.py", GPUCount: 4, Nodes: 1, State: api.StateQueued}
		if mod != nil {
			mod(j)
		}
		return j
	}
	now := t0.Add(5 * time.Hour)
	est := b.Estimator(now, fallback)
	for _, c := range []struct {
		name string
		job  *api.Job
		want Estimate
	}{
		{"given", queued("resnet-sweep", func(j *api.Job) { j.EstimatedDuration = secs(10 * time.Minute) }),
			Estimate{Run: 10 * time.Minute, Given: true, Basis: BasisGiven}},
		{"learned by name", queued("resnet-sweep", nil),
			Estimate{Run: 50 * time.Minute, Given: true, Low: 30 * time.Minute, Point: 40 * time.Minute, Basis: "from 3 runs of resnet-sweep by ana"}},
		{"learned by command", queued("other", nil),
			Estimate{Run: 50 * time.Minute, Given: true, Low: 30 * time.Minute, Point: 40 * time.Minute, Basis: "from 3 runs of the same command by ana"}},
		{"capped by the time limit", queued("resnet-sweep", func(j *api.Job) { j.TimeLimit = secs(35 * time.Minute) }),
			Estimate{Run: 35 * time.Minute, Given: true, Low: 30 * time.Minute, Point: 35 * time.Minute, Basis: "from 3 runs of resnet-sweep by ana"}},
		{"another user: the cluster's", &api.Job{ID: "q", User: "bo", Command: "x", GPUCount: 1, State: api.StateQueued},
			Estimate{Run: 50 * time.Minute, Given: true, Low: 30 * time.Minute, Point: 40 * time.Minute, Basis: "from the cluster's last 3 runs"}},
		{"running past its estimate", queued("resnet-sweep", func(j *api.Job) {
			start := now.Add(-2 * time.Hour)
			j.State, j.StartedAt = api.StateRunning, &start
		}), Estimate{Run: 4 * time.Hour, Given: true, Low: 2 * time.Hour, Point: 4 * time.Hour, Basis: "from 3 runs of resnet-sweep by ana"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := est(c.job); got != c.want {
				t.Errorf("%+v; want %+v", got, c.want)
			}
		})
	}
	// Without history: the fallback, capped.
	fresh := New(fakeCluster{})
	j := queued("resnet-sweep", func(j *api.Job) { j.TimeLimit = secs(20 * time.Minute) })
	if got, want := fresh.Estimator(now, fallback)(j), (Estimate{Run: 20 * time.Minute, Basis: BasisFallback}); got != want {
		t.Errorf("no history: %+v; want %+v", got, want)
	}
}

// A restart keeps what was learned: the rows written come back through
// Load and give the same estimates.
func TestLoadKeepsLearnedEstimates(t *testing.T) {
	b := New(fakeCluster{})
	var st store.State
	for i, ran := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour} {
		tx := ended(b, job(string(rune('a'+i)), "bert", ran), api.ReasonExitCode)
		st.Runs = append(st.Runs, tx.B.Runs...)
	}
	q := &api.Job{ID: "q", User: "ana", Name: "bert", Command: "python train.py", GPUCount: 4, Nodes: 1, State: api.StateQueued}
	before := b.Estimator(t0, fallback)(q)
	again := New(fakeCluster{})
	again.Load(&st)
	if after := again.Estimator(t0, fallback)(q); after != before || after.Basis != "from 4 runs of bert by ana" {
		t.Errorf("after a restart %+v; before %+v", after, before)
	}
}

func secs(d time.Duration) *api.Seconds {
	s := api.Seconds(d.Seconds())
	return &s
}

// means are fixed mean run times by user.
type means map[string]time.Duration

func (m means) Estimate(user string) (time.Duration, bool) { d, ok := m[user]; return d, ok }

func TestMeanOr(t *testing.T) {
	fb := MeanOr(means{"ana": 20 * time.Minute, "bo": 0}, 3*time.Hour)
	for _, c := range []struct {
		user  string
		want  time.Duration
		basis string
	}{
		{"ana", 20 * time.Minute, "from ana's mean run time"},
		{"bo", 3 * time.Hour, BasisFallback}, // a mean of zero is none
		{"cy", 3 * time.Hour, BasisFallback},
	} {
		if d, basis := fb(c.user); d != c.want || basis != c.basis {
			t.Errorf("%s: %v %q, want %v %q", c.user, d, basis, c.want, c.basis)
		}
	}
}
