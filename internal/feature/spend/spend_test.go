package spend

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// fakeTx is a feature.Tx: a batch at a time.

// fakeCluster is the orchestrator's books as the feature reads them:
// every GPU an H100, holders by "node/index", the running jobs.
type fakeCluster struct {
	holders    map[string]string
	running    []*api.Job
	reschedule int
}

func (c *fakeCluster) GPUModel(node string, gpu int) string { return "H100" }
func (c *fakeCluster) Owner(node string, gpu int) string {
	return c.holders[fmt.Sprintf("%s/%d", node, gpu)]
}
func (c *fakeCluster) Active() iter.Seq[*api.Job] { return slices.Values(c.running) }
func (c *fakeCluster) Reschedule()                { c.reschedule++ }

// fakeNotes keeps what was noted.
type fakeNotes struct{ evs []notify.Event }

func (n *fakeNotes) On() bool             { return true }
func (n *fakeNotes) Note(ev notify.Event) { n.evs = append(n.evs, ev) }

// fakeLedger is the stored ledger.
type fakeLedger struct {
	totals []store.UsageTotal
	recs   []usage.Record
	err    error
}

func (l *fakeLedger) UsageTotals(context.Context) ([]store.UsageTotal, error) { return l.totals, l.err }
func (l *fakeLedger) UsageRecords(_ context.Context, since, until time.Time) ([]usage.Record, error) {
	var out []usage.Record
	for _, r := range l.recs {
		if (since.IsZero() || !r.End.Before(since)) && (until.IsZero() || r.Start.Before(until)) {
			out = append(out, r)
		}
	}
	return out, l.err
}

var t0 = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

// books returns loaded books at t0 with the given settings.
func books(t *testing.T, settings map[string]string, l *fakeLedger) (*Books, *fakeCluster, *fakeNotes) {
	t.Helper()
	c := &fakeCluster{holders: map[string]string{}}
	n := &fakeNotes{}
	b := New(c, Config{Now: func() time.Time { return t0 }, Notes: n, NodeTTL: 30 * time.Second})
	if l == nil {
		l = &fakeLedger{}
	}
	if err := b.Load(context.Background(), settings, l); err != nil {
		t.Fatal(err)
	}
	return b, c, n
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func ran(id, user string, start time.Time, alloc ...api.Allocation) *api.Job {
	return &api.Job{ID: id, User: user, Project: "p", StartedAt: &start, Allocation: alloc, State: api.StateRunning}
}

// An attempt's rows are one per node, with its used GPU time, and take
// the reason of the job's next transition in the same transaction only.
func TestChargeAttempt(t *testing.T) {
	b, c, _ := books(t, nil, nil)
	j := ran("j1", "ana", t0, api.Allocation{NodeID: "n1", GPUID: 0}, api.Allocation{NodeID: "n1", GPUID: 1}, api.Allocation{NodeID: "n2", GPUID: 0})
	c.holders["n1/0"] = "j1"
	b.IntegrateReadings("n1", []api.GPUReading{{Index: 0, Utilization: 50}}, t0)
	b.IntegrateReadings("n1", []api.GPUReading{{Index: 0, Utilization: 50}}, t0.Add(10*time.Second))
	if got := b.Used("j1", "n1"); !near(got, 5) {
		t.Fatalf("used %v GPU-seconds, want 5", got)
	}
	other := &featuretest.Tx{At: t0.Add(time.Minute)}
	tx := &featuretest.Tx{At: t0.Add(time.Minute)}
	b.ChargeAttempt(tx, j, tx.At)
	b.Moved(other, j, api.Event{To: api.StateCompleted, Reason: "elsewhere"})
	j.State = api.StateCompleted
	b.Moved(tx, j, api.Event{To: api.StateCompleted, Reason: "exit_0"})
	rows := tx.B.Usage
	if len(rows) != 2 {
		t.Fatalf("%d rows, want one per node: %+v", len(rows), rows)
	}
	if r := rows[0]; r.Node != "n1" || r.GPUs != 2 || !near(r.GPUSeconds, 120) || !near(r.UsedGPUSeconds, 5) || r.Ended != "exit_0" || r.GPUModel != "H100" || r.Kind != usage.KindJob {
		t.Errorf("first row %+v", r)
	}
	if r := rows[1]; r.Node != "n2" || r.GPUs != 1 || !near(r.GPUSeconds, 60) || r.UsedGPUSeconds != 0 || r.Ended != "exit_0" {
		t.Errorf("second row %+v", r)
	}
	if b.Used("j1", "n1") != 0 {
		t.Error("the attempt's utilization is still kept")
	}
	tot := b.Totals()
	if len(tot) != 1 || !near(tot[0].GPUSeconds, 180) || tot[0].Dollars != 0 {
		t.Errorf("totals %+v", tot)
	}
	// A transaction committed forgets its unsettled rows.
	tx2 := &featuretest.Tx{At: t0.Add(2 * time.Minute)}
	j2 := ran("j2", "ana", t0, api.Allocation{NodeID: "n1", GPUID: 2})
	b.ChargeAttempt(tx2, j2, tx2.At)
	b.Committed(tx2)
	b.Moved(tx2, j2, api.Event{Reason: "late"})
	if tx2.B.Usage[0].Ended != "" {
		t.Errorf("a committed transaction's row was settled: %+v", tx2.B.Usage[0])
	}
}

// Readings count over the time since the GPU's last one, clamped to
// 0-100%, for whatever holds the GPU; a silence past 2 TTLs counts
// nothing.
func TestIntegrateReadings(t *testing.T) {
	b, c, _ := books(t, nil, nil)
	c.holders["n1/0"] = "h1"
	read := func(at time.Duration, u int) {
		b.IntegrateReadings("n1", []api.GPUReading{{Index: 0, Utilization: u}, {Index: 1, Utilization: 100}}, t0.Add(at))
	}
	read(0, 0)
	read(10*time.Second, 150) // 10s at 100%
	read(20*time.Second, -5)  // nothing
	read(2*time.Minute, 100)  // silent 100s > 60s: nothing
	read(2*time.Minute+10*time.Second, 50)
	if got := b.Used("h1", "n1"); !near(got, 15) {
		t.Errorf("used %v, want 15", got)
	}
}

// A hold's rows are charged to the project given, with the reason given.
func TestChargeHold(t *testing.T) {
	b, _, _ := books(t, nil, nil)
	tx := &featuretest.Tx{At: t0.Add(time.Hour)}
	b.ChargeHold(tx, &api.Hold{JobID: "h1", User: "bo", HeldAt: t0, Allocation: []api.Allocation{{NodeID: "n1", GPUID: 3}}}, "default", "released")
	if len(tx.B.Usage) != 1 {
		t.Fatalf("rows %+v", tx.B.Usage)
	}
	if r := tx.B.Usage[0]; r.Kind != usage.KindHold || r.Project != "default" || r.Ended != "released" || !near(r.GPUSeconds, 3600) {
		t.Errorf("row %+v", r)
	}
	b.ChargeHold(tx, &api.Hold{JobID: "h2", HeldAt: tx.At}, "default", "released")
	if len(tx.B.Usage) != 1 {
		t.Error("a hold of no time was charged")
	}
}

// Booked idle time is spread over the booking's nodes by their GPUs; a
// booking with no GPUs chosen is one row without a node.
func TestChargeBookingIdle(t *testing.T) {
	b, _, _ := books(t, nil, nil)
	tx := &featuretest.Tx{At: t0.Add(time.Hour)}
	r := &api.Reservation{Name: "demo", Owner: "ana", Project: "p", Start: t0, End: t0.Add(2 * time.Hour),
		Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}, {NodeID: "n2", GPUID: 0}}}
	b.ChargeBookingIdle(tx, r, 3000)
	rows := tx.B.Usage
	if len(rows) != 2 || !near(rows[0].GPUSeconds, 2000) || !near(rows[1].GPUSeconds, 1000) || !rows[0].End.Equal(tx.At) ||
		rows[0].Ended != "idle" || rows[0].Attempt != int(t0.Unix()) || rows[0].Kind != usage.KindBookingIdle {
		t.Errorf("rows %+v", rows)
	}
	tx = &featuretest.Tx{At: t0.Add(3 * time.Hour)}
	b.ChargeBookingIdle(tx, &api.Reservation{Name: "any", Owner: "ana", GPUs: 2, GPUType: "A100", Start: t0, End: t0.Add(time.Hour)}, 100)
	if rows := tx.B.Usage; len(rows) != 1 || rows[0].Node != "" || rows[0].GPUs != 2 || !rows[0].End.Equal(t0.Add(time.Hour)) {
		t.Errorf("rows %+v", rows)
	}
	b.ChargeBookingIdle(tx, r, 0)
	b.ChargeBookingIdle(tx, nil, 10)
	if len(tx.B.Usage) != 1 {
		t.Error("nothing to charge was charged")
	}
}

// A budget notes each threshold once, stores that it did, and at 100%
// with action hold holds its user's queued jobs until an admin releases
// it; with action preemptible, new jobs are made preemptible.
func TestBudgets(t *testing.T) {
	b, c, n := books(t, map[string]string{settingPrices: `{"H100": 2}`}, nil)
	tx := &featuretest.Tx{At: t0}
	if err := CheckBudget(usage.Budget{Kind: "team", Name: "x", Dollars: 1}); err == nil {
		t.Error("a budget of kind team was taken")
	}
	if _, err := b.SetBudget(tx, usage.Budget{Kind: usage.BudgetUser, Name: "carol", Dollars: 4, Action: usage.ActionHold}); err != nil {
		t.Fatal(err)
	}
	if tx.B.Settings[settingBudgets] == "" {
		t.Error("the budget is not stored")
	}
	// A running attempt counts: 2 GPUs for 30 minutes at $2 is $2, 50%.
	c.running = []*api.Job{ran("j1", "carol", t0, api.Allocation{NodeID: "n1", GPUID: 0}, api.Allocation{NodeID: "n1", GPUID: 1})}
	tx = &featuretest.Tx{At: t0.Add(30 * time.Minute)}
	b.CheckRunning(tx)
	if len(n.evs) != 1 || n.evs[0].Kind != notify.Budget50 || tx.B.Settings[settingBudgetState] == "" {
		t.Fatalf("noted %+v, settings %v", n.evs, tx.B.Settings)
	}
	b.CheckRunning(tx)
	if len(n.evs) != 1 {
		t.Errorf("a threshold told twice: %+v", n.evs)
	}
	// It ends after an hour: $4, 100% (80 and 100 told at once).
	tx = &featuretest.Tx{At: t0.Add(time.Hour)}
	b.ChargeAttempt(tx, c.running[0], tx.At)
	c.running = nil
	if len(n.evs) != 3 || n.evs[2].Kind != notify.Budget100 || c.reschedule == 0 {
		t.Fatalf("noted %+v, reschedule %d", n.evs, c.reschedule)
	}
	q := []sched.Job{{ID: "j2", User: "carol", Project: "p"}, {ID: "j3", User: "bo", Project: "p"}}
	b.GateQueue(q, tx.At)
	if q[0].Held != usage.ReasonBudgetExhausted || q[0].HeldNote == "" || q[1].Held != "" {
		t.Errorf("queue %+v", q)
	}
	st, err := b.ReleaseBudget(tx, usage.BudgetUser, "carol")
	if err != nil || !st.Released || !st.Exhausted {
		t.Fatalf("release: %+v, %v", st, err)
	}
	q[0].Held = ""
	b.GateQueue(q, tx.At)
	if q[0].Held != "" {
		t.Error("a released budget still holds")
	}
	// The next month starts over.
	b.budget.state.Released = map[string]bool{}
	q[0].Held = ""
	b.GateQueue(q, t0.AddDate(0, 1, 0))
	if q[0].Held != "" || b.budget.state.Period != "2025-04" {
		t.Errorf("a new month still holds: %+v, period %s", q[0], b.budget.state.Period)
	}
	if err := b.UnsetBudget(tx, usage.BudgetUser, "carol"); err != nil {
		t.Fatal(err)
	}
	var ae *api.Error
	if err := b.UnsetBudget(tx, usage.BudgetUser, "carol"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("unset twice: %v", err)
	}
	if _, err := b.ReleaseBudget(tx, usage.BudgetUser, "carol"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("release of none: %v", err)
	}
	if b.HasBudgets() {
		t.Error("a budget is left")
	}
}

// An exhausted budget with action preemptible makes a new job
// preemptible at the lowest priority; it never refuses one.
func TestCheckSubmitPreemptible(t *testing.T) {
	b, _, _ := books(t, nil, &fakeLedger{recs: []usage.Record{{Kind: usage.KindJob, ID: "old", User: "ana", Project: "p",
		GPUs: 1, GPUSeconds: 7200, Start: t0.Add(-3 * time.Hour), End: t0.Add(-time.Hour)}}})
	tx := &featuretest.Tx{At: t0}
	if _, err := b.SetBudget(tx, usage.Budget{Kind: usage.BudgetProject, Name: "p", GPUHours: 2, Action: usage.ActionPreemptible}); err != nil {
		t.Fatal(err)
	}
	j := &api.Job{User: "ana", Project: "p", Class: api.ClassBatch, Priority: api.PriorityHigh}
	if err := b.CheckSubmit(&feature.Submission{Job: j}); err != nil || j.Class != api.ClassPreemptible || j.Priority != api.PriorityLow {
		t.Errorf("job %+v, %v", j, err)
	}
	other := &api.Job{User: "bo", Project: "q", Class: api.ClassBatch}
	if b.CheckSubmit(&feature.Submission{Job: other}); other.Class != api.ClassBatch {
		t.Error("a job without a budget was changed")
	}
}

// Load reads the heartbeat, prices, budgets and this period's state (not
// another's), the all-time totals and the month's spend.
func TestLoad(t *testing.T) {
	alive := t0.Add(-time.Minute)
	settings := map[string]string{
		settingAliveAt:     alive.Format(time.RFC3339Nano),
		settingPrices:      `{"H100": 3.6}`,
		settingBudgets:     `{"user/ana": {"kind": "user", "name": "ana", "gpu_hours": 10}}`,
		settingBudgetState: `{"period": "2025-02", "notified": {"user/ana": 80}}`,
	}
	l := &fakeLedger{
		totals: []store.UsageTotal{{User: "ana", Project: "p", GPUModel: "H100", GPUSeconds: 3600}},
		recs: []usage.Record{{Kind: usage.KindJob, ID: "j", User: "ana", Project: "p", GPUModel: "H100", GPUs: 1, GPUSeconds: 7200,
			Start: t0.Add(-2 * time.Hour), End: t0}},
	}
	b, _, _ := books(t, settings, l)
	if !b.AliveAt().Equal(alive) {
		t.Errorf("alive at %v", b.AliveAt())
	}
	if p := b.Prices(); p["H100"] != 3.6 {
		t.Errorf("prices %v", p)
	}
	tot := b.Totals()
	if len(tot) != 1 || !near(tot[0].Dollars, 3.6) {
		t.Errorf("totals %+v", tot)
	}
	st := b.Budgets()
	if len(st) != 1 || !near(st[0].UsedGPUHours, 2) || st[0].Notified != 0 || st[0].Period != "2025-03" {
		t.Errorf("budgets %+v", st)
	}
	if err := New(&fakeCluster{}, Config{}).Load(context.Background(), nil, &fakeLedger{err: errors.New("down")}); err == nil {
		t.Error("a ledger that cannot be read loaded")
	}
}

// Prices are set and unset in the transaction; bad input names its
// field.
func TestPrices(t *testing.T) {
	b, _, _ := books(t, nil, nil)
	tx := &featuretest.Tx{At: t0}
	p, err := b.SetPrice(tx, "H100", 2.5)
	if err != nil || p["H100"] != 2.5 || tx.B.Settings[settingPrices] != `{"H100":2.5}` {
		t.Fatalf("%v, %v, %v", p, err, tx.B.Settings)
	}
	p["H100"] = 9
	if b.Prices()["H100"] != 2.5 {
		t.Error("the prices returned are the books'")
	}
	var ae *api.Error
	if _, err := b.UnsetPrice(tx, "A100"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("unset of none: %v", err)
	}
	if _, err := b.UnsetPrice(tx, "H100"); err != nil || len(b.Prices()) != 0 {
		t.Errorf("unset: %v, %v", err, b.Prices())
	}
	if err := CheckPrice("H100", -1); !errors.As(err, &ae) || ae.Field != "dollars_per_hour" {
		t.Errorf("negative price: %v", err)
	}
}

// Report checks its query, keeps a user's own records when asked, and
// prices at the prices given.
func TestReport(t *testing.T) {
	ctx := context.Background()
	l := &fakeLedger{recs: []usage.Record{
		{Kind: usage.KindJob, ID: "a", User: "ana", GPUModel: "H100", GPUs: 1, GPUSeconds: 3600, Start: t0, End: t0.Add(time.Hour)},
		{Kind: usage.KindJob, ID: "b", User: "bo", GPUModel: "H100", GPUs: 1, GPUSeconds: 3600, Start: t0, End: t0.Add(time.Hour)},
	}}
	prices := func() usage.Prices { return usage.Prices{"H100": 2} }
	var ae *api.Error
	if _, err := Report(ctx, l, Query{By: "color"}, prices); !errors.As(err, &ae) || ae.Field != "by" {
		t.Errorf("bad by: %v", err)
	}
	if _, err := Report(ctx, l, Query{Since: t0, Until: t0}, prices); !errors.As(err, &ae) || ae.Field != "until" {
		t.Errorf("empty window: %v", err)
	}
	rep, err := Report(ctx, l, Query{User: "ana"}, prices)
	if err != nil || len(rep.Rows) != 1 || !near(rep.Rows[0].GPUSeconds, 3600) {
		t.Errorf("%+v, %v", rep, err)
	}
}

// An attempt lost with the previous server is charged up to its last
// heartbeat, to the job in GPU equivalents and in the ledger; one that
// started after it, or never, is not charged.
func TestChargeLost(t *testing.T) {
	alive := t0.Add(-time.Minute)
	for _, tc := range []struct {
		name        string
		started     *time.Time
		alloc       []api.Allocation
		wantSeconds float64 // added to the job's GPUSeconds
		wantRows    int
	}{
		{"two whole GPUs for 10 minutes", new(alive.Add(-10 * time.Minute)),
			[]api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}}, 1200, 1},
		{"half a GPU for 10 minutes", new(alive.Add(-10 * time.Minute)),
			[]api.Allocation{{NodeID: "n1", GPUID: 0, Fraction: 0.5}}, 300, 1},
		{"started after the last heartbeat", new(alive.Add(time.Second)),
			[]api.Allocation{{NodeID: "n1", GPUID: 0}}, 0, 0},
		{"never started", nil, []api.Allocation{{NodeID: "n1", GPUID: 0}}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _, _ := books(t, map[string]string{settingAliveAt: alive.Format(time.RFC3339Nano)}, nil)
			j := &api.Job{ID: "j", User: "ana", Project: "p", StartedAt: tc.started, Allocation: tc.alloc, State: api.StateRunning, GPUSeconds: 7}
			tx := &featuretest.Tx{At: t0}
			b.ChargeLost(tx, j)
			if !near(j.GPUSeconds, 7+tc.wantSeconds) {
				t.Errorf("job's GPU-seconds %v; want %v", j.GPUSeconds, 7+tc.wantSeconds)
			}
			if len(tx.B.Usage) != tc.wantRows {
				t.Fatalf("%d usage rows; want %d: %+v", len(tx.B.Usage), tc.wantRows, tx.B.Usage)
			}
			if tc.wantRows > 0 && (!tx.B.Usage[0].End.Equal(alive) || !near(tx.B.Usage[0].GPUSeconds, tc.wantSeconds)) {
				t.Errorf("row %+v; want to end at the heartbeat with %v GPU-seconds", tx.B.Usage[0], tc.wantSeconds)
			}
		})
	}
}
