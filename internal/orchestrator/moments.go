package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/store"
)

// The moments of the loop that features serve are named in package
// feature; features.go registers the features in one order.

// Now and Batch make txn a feature.Tx.
func (tx *txn) Now() time.Time      { return tx.now }
func (tx *txn) Batch() *store.Batch { return &tx.batch }

// ownTxn is the loop's transaction behind a Tx, for the features still
// inside this package: they reach past Tx into the shared books until
// they move out to packages of their own.
func ownTxn(t feature.Tx) *txn { return t.(*txn) }

// moments holds the registered features by the moments they serve, each
// list in registration order. Built once by New.
type moments struct {
	submit   []feature.SubmitCheck
	movers   []feature.Mover
	commit   []feature.Committer
	eligible []feature.Eligibility
	snapshot []feature.SnapshotPart
	gate     []feature.QueueGate
	tick     []feature.Ticker
	load     []feature.Loader
}

// register sorts features into the moments they serve. A TxTicker and a
// RunningTicker tick in a transaction of the loop's (txTick, runTick), in
// their places among the Tickers.
func (m *moments) register(o *Orchestrator, features []any) {
	for _, f := range features {
		if c, ok := f.(feature.TxTicker); ok {
			m.tick = append(m.tick, txTick{o, c})
		}
		if c, ok := f.(feature.RunningTicker); ok {
			m.tick = append(m.tick, runTick{o, c})
		}
		if c, ok := f.(feature.SubmitCheck); ok {
			m.submit = append(m.submit, c)
		}
		if c, ok := f.(feature.Mover); ok {
			m.movers = append(m.movers, c)
		}
		if c, ok := f.(feature.Committer); ok {
			m.commit = append(m.commit, c)
		}
		if c, ok := f.(feature.Eligibility); ok {
			m.eligible = append(m.eligible, c)
		}
		if c, ok := f.(feature.SnapshotPart); ok {
			m.snapshot = append(m.snapshot, c)
		}
		if c, ok := f.(feature.QueueGate); ok {
			m.gate = append(m.gate, c)
		}
		if c, ok := f.(feature.Ticker); ok {
			m.tick = append(m.tick, c)
		}
		if c, ok := f.(feature.Loader); ok {
			m.load = append(m.load, c)
		}
	}
}

// txTick runs a TxTicker in a transaction of the loop's own (inTx),
// committed when the feature did work and the batch has rows or
// notifications wait to be written.
type txTick struct {
	o *Orchestrator
	f feature.TxTicker
}

func (t txTick) Tick(ctx context.Context) {
	t.o.inTx(ctx, t.f.TickName(), func(tx *txn) bool {
		return t.f.TickTx(tx) && (!tx.batch.Empty() || t.o.notes.Pending())
	})
}

// runTick runs a RunningTicker in a transaction of the loop's own
// (inTx), with the running work as this tick sees it; committed when the
// feature says so.
type runTick struct {
	o *Orchestrator
	f feature.RunningTicker
}

func (t runTick) Tick(ctx context.Context) {
	t.o.inTx(ctx, t.f.TickName(), func(tx *txn) bool { return t.f.TickRunning(tx, running{t.o.jobs, t.o, ctx}) })
}

// loop is the loop as a feature's API operations see it (feature.Loop):
// an op of the loop's (do), the read lock, the test's hook before a read
// of the store made without the lock, and what an op's transaction may
// ask of the shared books.
type loop struct{ o *Orchestrator }

func (l loop) Do(ctx context.Context, fn func(tx feature.Tx) (any, error)) (any, error) {
	return l.o.do(ctx, func(tx *txn) (any, error) { return fn(tx) })
}

func (l loop) Read(fn func()) {
	l.o.mu.RLock()
	defer l.o.mu.RUnlock()
	fn()
}

func (l loop) BeforeRead(what string) { l.o.beforeRead(what) } // reads.go

func (l loop) Touch(tx feature.Tx, j *api.Job) { ownTxn(tx).touch(j) }
func (l loop) Replan()                         { l.o.dirty = true }

func (l loop) Transition(tx feature.Tx, j *api.Job, to api.State, reason, message string) {
	ownTxn(tx).transition(j, to, reason, message)
}

func (l loop) Running(ctx context.Context) feature.Running { return running{l.o.jobs, l.o, ctx} }

// admit runs the submission through every SubmitCheck, in order; the
// first refusal is the answer.
func (m *moments) admit(s *feature.Submission) error {
	for _, c := range m.submit {
		if err := c.CheckSubmit(s); err != nil {
			return err
		}
	}
	return nil
}

// eligibleQueue passes the queue through every Eligibility, in order:
// the jobs the cycle's snapshot may hold.
func (m *moments) eligibleQueue(tx feature.Tx, queue []*api.Job) []*api.Job {
	for _, f := range m.eligible {
		queue = f.Eligible(tx, queue)
	}
	return queue
}

// loadAll hands the store's state to every Loader, in order (recovery).
func (m *moments) loadAll(st *store.State) {
	for _, l := range m.load {
		l.Load(st)
	}
}
