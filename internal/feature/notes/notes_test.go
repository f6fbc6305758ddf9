package notes

import (
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// fakeBooks is the orchestrator's books as the feature reads them.
type fakeBooks struct {
	jobs   map[string]*api.Job
	arrays map[string]*api.Array
	waits  [][2]time.Time // when each job was queued, and started (zero: waiting)
}

func (b *fakeBooks) Get(id string) *api.Job { return b.jobs[id] }

func (b *fakeBooks) Array(id string) (*api.Array, string) {
	if a := b.arrays[id]; a != nil {
		return a, api.NotifyEnd
	}
	return nil, ""
}

func (b *fakeBooks) QueueWaits() iter.Seq2[time.Time, time.Time] {
	return func(yield func(time.Time, time.Time) bool) {
		for _, w := range b.waits {
			if !yield(w[0], w[1]) {
				return
			}
		}
	}
}

// fakeNotifier plans one row per event, its kind and what it is about,
// and counts kicks.
type fakeNotifier struct{ kicks int }

func (f *fakeNotifier) Plan(evs []notify.Event) []store.OutboxItem {
	var rows []store.OutboxItem
	for _, ev := range evs {
		data := ""
		switch {
		case ev.Job != nil:
			data = ev.Job.ID
		case ev.Array != nil:
			data = ev.Array.ID
		case ev.Alert != nil:
			data = ev.Alert.Message
		}
		rows = append(rows, store.OutboxItem{Kind: string(ev.Kind), CreatedAt: ev.At, Data: data})
	}
	return rows
}

func (f *fakeNotifier) Kick() { f.kicks++ }

// fakeTx is a transaction of the loop.

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func newNotes(b *fakeBooks, cfg Config) (*Notes, *fakeNotifier) {
	f := &fakeNotifier{}
	cfg.Notify = f
	return New(b, cfg), f
}

// kinds lists the rows' kinds (and data), sorted: the order of an
// array's summaries is a map's.
func kinds(rows []store.OutboxItem) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Kind+" "+r.Data)
	}
	slices.Sort(out)
	return out
}

func ev(id string, from, to api.State, reason string) store.JobEvent {
	return store.JobEvent{JobID: id, Event: api.Event{From: from, To: to, Reason: reason, At: t0}}
}

// TestBeforeCommit: a batch's rows are its transitions people are told
// about, the events noted since the last commit, and the summary of an
// array whose last task ended; a job the books no longer hold is skipped.
func TestBeforeCommit(t *testing.T) {
	for name, c := range map[string]struct {
		noted  func(n *Notes)
		events []store.JobEvent
		arrays map[string]*api.Array
		want   []string
	}{
		"nothing": {},
		"transitions": {
			events: []store.JobEvent{ev("a", api.StateAllocating, api.StateRunning, ""), ev("a", api.StateRunning, api.StateCompleted, ""),
				ev("b", "", api.StateQueued, ""), ev("gone", api.StateRunning, api.StateFailed, "")},
			want: []string{"job.began a", "job.completed a"},
		},
		"noted and a transition": {
			noted:  func(n *Notes) { n.Alert(notify.AlertNodeDown, t0, "n1", nil, "node %s is down", "n1") },
			events: []store.JobEvent{ev("b", api.StateRunning, api.StateFailed, "")},
			want:   []string{"alert.node_down node n1 is down", "job.failed b"},
		},
		"array's last task": {
			events: []store.JobEvent{ev("t1", api.StateRunning, api.StateCompleted, "")},
			arrays: map[string]*api.Array{"arr": {ID: "arr", Counts: api.ArrayCounts{Completed: 2, Failed: 1}}},
			want:   []string{"array.finished arr", "job.completed t1"},
		},
		"array with a task left": {
			events: []store.JobEvent{ev("t1", api.StateRunning, api.StateCompleted, "")},
			arrays: map[string]*api.Array{"arr": {ID: "arr", Counts: api.ArrayCounts{Completed: 2, Queued: 1}}},
			want:   []string{"job.completed t1"},
		},
		"array no longer in memory": {
			events: []store.JobEvent{ev("t1", api.StateRunning, api.StateCompleted, "")},
			want:   []string{"job.completed t1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := &fakeBooks{jobs: map[string]*api.Job{"a": {ID: "a"}, "b": {ID: "b"}, "t1": {ID: "t1", ArrayJobID: "arr"}}, arrays: c.arrays}
			n, f := newNotes(b, Config{})
			if c.noted != nil {
				c.noted(n)
			}
			tx := &featuretest.Tx{At: t0, B: store.Batch{Events: c.events}}
			n.BeforeCommit(tx)
			if got := kinds(tx.B.Outbox); !slices.Equal(got, c.want) {
				t.Errorf("rows %q, want %q", got, c.want)
			}
			if n.Pending() {
				t.Error("still pending after a commit's rows were planned")
			}
			n.Committed(tx)
			if want := min(len(c.want), 1); f.kicks != want {
				t.Errorf("%d kicks, want %d", f.kicks, want)
			}
		})
	}
}

// TestOff: without a Notifier, or without the feature at all, nothing is
// noted or planned.
func TestOff(t *testing.T) {
	for name, n := range map[string]*Notes{"no notifier": New(&fakeBooks{}, Config{}), "nil": nil} {
		t.Run(name, func(t *testing.T) {
			n.Alert(notify.AlertNodeDown, t0, "n1", nil, "down")
			n.Job(&api.Job{ID: "a"}, notify.JobIdle, t0)
			n.Note(notify.Event{Kind: notify.Budget50})
			n.NodeReadings("n1", []api.GPUReading{{Index: 0, Temperature: new(99)}}, nil, t0)
			if n.On() || n.Pending() {
				t.Fatalf("on %v, pending %v", n.On(), n.Pending())
			}
			if n == nil {
				return
			}
			tx := &featuretest.Tx{At: t0, B: store.Batch{Events: []store.JobEvent{ev("a", api.StateRunning, api.StateFailed, "")}}}
			n.BeforeCommit(tx)
			n.Committed(tx)
			if len(tx.B.Outbox) != 0 {
				t.Errorf("%d rows", len(tx.B.Outbox))
			}
		})
	}
}

// TestTimeWarning: a running job is warned once per attempt, after 80% of
// its time limit; its end forgets it.
func TestTimeWarning(t *testing.T) {
	started := t0
	j := &api.Job{ID: "a", StartedAt: &started, TimeLimit: new(api.Seconds(3600))}
	b := &fakeBooks{jobs: map[string]*api.Job{"a": j}}
	n, _ := newNotes(b, Config{})
	warnings := func() int {
		tx := &featuretest.Tx{At: t0}
		n.BeforeCommit(tx)
		return len(tx.B.Outbox)
	}
	for _, s := range []struct {
		at    time.Duration
		retry int
		want  int
	}{
		{47 * time.Minute, 0, 0},
		{48 * time.Minute, 0, 1},
		{50 * time.Minute, 0, 0}, // told already
		{55 * time.Minute, 1, 1}, // a new attempt
		{56 * time.Minute, 1, 0},
	} {
		j.RetryCount = s.retry
		n.TimeWarning(j, t0.Add(s.at))
		if got := warnings(); got != s.want {
			t.Errorf("at %s, attempt %d: %d warnings, want %d", s.at, s.retry, got, s.want)
		}
	}
	n.BeforeCommit(&featuretest.Tx{At: t0, B: store.Batch{Events: []store.JobEvent{ev("a", api.StateRunning, api.StateCanceled, "")}}})
	n.TimeWarning(j, t0.Add(58*time.Minute))
	if got := warnings(); got != 1 {
		t.Errorf("after its end: %d warnings, want 1 (it was forgotten)", got)
	}
	n.TimeWarning(&api.Job{ID: "b", StartedAt: &started}, t0.Add(time.Hour)) // no limit
	if got := warnings(); got != 0 {
		t.Errorf("a job without a limit: %d warnings", got)
	}
}

// TestNodeReadings: each GPU alert is raised once per episode: over
// temperature again only after it cooled down, ECC when the count rose,
// a foreign process when it is new.
func TestNodeReadings(t *testing.T) {
	n, _ := newNotes(&fakeBooks{}, Config{GPUTemp: 85})
	alerts := func() []string {
		tx := &featuretest.Tx{At: t0}
		n.BeforeCommit(tx)
		var out []string
		for _, r := range tx.B.Outbox {
			out = append(out, r.Kind)
		}
		return out
	}
	temp := func(c int) []api.GPUReading { return []api.GPUReading{{Index: 0, Temperature: &c}} }
	ecc := func(e int64) []api.GPUReading { return []api.GPUReading{{Index: 1, ECCErrors: e}} }
	proc := []api.ForeignProcess{{GPU: 2, PID: 77, Name: "miner", User: "eve"}}
	for i, s := range []struct {
		readings []api.GPUReading
		foreign  []api.ForeignProcess
		want     string
	}{
		{temp(84), nil, ""},
		{temp(85), nil, "alert.gpu_temperature"},
		{temp(90), nil, ""},
		{[]api.GPUReading{{Index: 0}}, nil, ""}, // no temperature read: still hot
		{temp(91), nil, ""},
		{temp(70), nil, ""},
		{temp(88), nil, "alert.gpu_temperature"},
		{ecc(2), nil, "alert.gpu_ecc"},
		{ecc(2), nil, ""},
		{ecc(3), nil, "alert.gpu_ecc"},
		{nil, proc, "alert.foreign_process"},
		{nil, proc, ""},
		{nil, nil, ""},
		{nil, proc, "alert.foreign_process"},
	} {
		n.NodeReadings("n1", s.readings, s.foreign, t0)
		if got := strings.Join(alerts(), ","); got != s.want {
			t.Errorf("step %d: alerts %q, want %q", i, got, s.want)
		}
	}
}

// TestDefaultGPUTemp: without a threshold, DefaultGPUTemp is one.
func TestDefaultGPUTemp(t *testing.T) {
	n, _ := newNotes(&fakeBooks{}, Config{})
	below, at := DefaultGPUTemp-1, DefaultGPUTemp
	n.NodeReadings("n1", []api.GPUReading{{Index: 0, Temperature: &below}}, nil, t0)
	if n.Pending() {
		t.Fatalf("alerted at %d°C", below)
	}
	n.NodeReadings("n1", []api.GPUReading{{Index: 0, Temperature: &at}}, nil, t0)
	if !n.Pending() {
		t.Fatalf("no alert at %d°C", at)
	}
}

// TestQueueWait: alert.queue_wait is raised once the p95 has stayed over
// the threshold for QueueWaitFor, not before, once per episode, and not
// at all when the threshold is off.
func TestQueueWait(t *testing.T) {
	b := &fakeBooks{}
	n, _ := newNotes(b, Config{QueueWait: time.Hour})
	now := t0
	for i, s := range []struct {
		after time.Duration
		p95   time.Duration
		want  bool
	}{
		{0, 30 * time.Minute, false},
		{30 * time.Minute, 2 * time.Hour, false}, // over from now
		{10 * time.Minute, 2 * time.Hour, false},
		{6 * time.Minute, 2 * time.Hour, true}, // 16 minutes over
		{time.Hour, 3 * time.Hour, false},      // told already
		{time.Minute, time.Hour, false},        // at the threshold: the episode ends
		{time.Minute, 2 * time.Hour, false},
		{QueueWaitFor, 2 * time.Hour, true}, // a new episode
	} {
		now = now.Add(s.after)
		b.waits = [][2]time.Time{{now.Add(-s.p95), time.Time{}}} // one job, waiting for p95
		n.CheckQueueWait(now)
		if n.Pending() != s.want {
			t.Errorf("step %d: alert %v, want %v", i, n.Pending(), s.want)
		}
		n.BeforeCommit(&featuretest.Tx{At: now})
	}
	off, _ := newNotes(&fakeBooks{waits: [][2]time.Time{{t0.Add(-100 * time.Hour), time.Time{}}}}, Config{})
	off.CheckQueueWait(t0)
	off.CheckQueueWait(t0.Add(time.Hour))
	if off.Pending() {
		t.Error("alerted with the threshold off")
	}
}

// TestQueueWaitP95: the waits of jobs queued now count so far, those of
// jobs started in the last 24 hours count whole, older starts not at all.
func TestQueueWaitP95(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	for _, tc := range []struct {
		name  string
		waits [][2]time.Time
		want  time.Duration
	}{
		{"none", nil, 0},
		{"queued", [][2]time.Time{{now.Add(-time.Hour), time.Time{}}}, time.Hour},
		{"started today", [][2]time.Time{{now.Add(-3 * time.Hour), now.Add(-time.Hour)}}, 2 * time.Hour},
		{"started yesterday: not counted", [][2]time.Time{{now.Add(-30 * time.Hour), now.Add(-25 * time.Hour)}}, 0},
		{"the 95th of twenty", func() [][2]time.Time {
			var w [][2]time.Time
			for i := 1; i <= 20; i++ {
				w = append(w, [2]time.Time{now.Add(-time.Duration(i) * time.Minute), time.Time{}})
			}
			return w
		}(), 19 * time.Minute},
	} {
		if got := queueWaitP95(&fakeBooks{waits: tc.waits}, now); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
