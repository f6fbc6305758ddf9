// Package orchestrator owns Corral's live state. One goroutine, the loop,
// is its only writer: API calls, executor reports and scheduling cycles all
// become operations the loop applies in order. Each batch of operations is
// committed to the store in one transaction (group commit) before any of
// them is acknowledged, so an acknowledged change survives kill -9.
//
//	API handlers ──ops──▶ loop ──batch──▶ store (SQLite, fsync)
//	                       │  ▲
//	       sched.Schedule ◀┘  └── executor updates (started, exited)
//	                       │
//	                       └──after commit──▶ executor.Start / Stop
//
// Readers take a read lock and copy what they need; the loop takes the write
// lock only while it mutates memory and commits.
package orchestrator

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/feature/ended"
	"github.com/corral-sched/corral/internal/feature/history"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/feature/limits"
	"github.com/corral-sched/corral/internal/feature/notes"
	"github.com/corral-sched/corral/internal/feature/reclaim"
	"github.com/corral-sched/corral/internal/feature/refs"
	"github.com/corral-sched/corral/internal/feature/runtimes"
	"github.com/corral-sched/corral/internal/feature/sizes"
	"github.com/corral-sched/corral/internal/feature/spend"
	"github.com/corral-sched/corral/internal/gpubook"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/policy"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// Orchestrator is the single writer of live state. Create it with New, run
// its loop with Run, and call its methods from any goroutine.
type Orchestrator struct {
	cfg     Config
	log     *slog.Logger
	ops     chan *op
	updates queue[exec.Update]
	entropy *ulid.MonotonicEntropy // ids are made by the loop only

	mu        sync.RWMutex         // guards everything below; written by the loop only
	jobs      *jobbook.Book        // the jobs in memory: in submission order, the queue, the active set, idempotency keys (package jobbook)
	holds     *holds.Books         // GPUs held outside the queue (package holds)
	gpus      *gpubook.Book        // the nodes, each whole GPU's owner, the slices and shares held (package gpubook)
	news      queue[nodebook.News] // node news for the loop; a lock of its own: pushed without waiting (nodes.go)
	pending   jobbook.Pending      // why each queued job waits and when it may start, from the last cycles (cycle.go)
	on        moments              // the features, by the moments they serve (features.go)
	ledger    *sched.Ledger        // decayed GPU usage per user and project
	estimator *sched.Estimator     // learned run times per user
	runtimes  *runtimes.Book       // learned run times by name, command, GPU count (feature/runtimes)
	policy    api.Policies
	running   bool // scheduling on
	stats     cycleStats
	startedAt time.Time
	changed   chan struct{} // closed and replaced after every commit
	hist      history.Books // the cluster over time, for graphs (package history)
	arr       *arrays.Books // job arrays (package arrays)
	deps      *deps.Tracker // job dependencies (package deps)

	dirty  bool         // loop-only: a cycle is due
	limits limits.Alarm // loop-only: the next time limit due

	health storeHealth // whether the store writes, and who waits on it (storedown.go)

	notes   *notes.Notes   // notifications: what was noted, alerts told (feature/notes)
	reclaim *reclaim.Books // idle reclaim of interactive jobs (package reclaim)

	bookings *bookings.Books // bookings and their running jobs (feature/bookings)

	spend *spend.Books // the usage ledger, prices and budgets (feature/spend)
	gone  ended.Books  // jobs that ended and left o.jobs (feature/ended, finished.go)
	views viewCache    // the age of cached views, and the last queue view (queue_page.go)
	test  testHooks    // seams only tests set
	sizes *sizes.Books // per user: bytes of jobs not ended and arrays in memory (package sizes)

	refs *refs.Resolver // short numbers, and what a person may type for a job (feature/refs)
}

// cycleStats is what the cycles leave behind: how many ran, when and how
// long the last one took, and its snapshot's queue for the next to reuse.
type cycleStats struct {
	count  uint64
	last   time.Time
	lastMS float64
	buf    []sched.Job // the last snapshot's queue, reused (loop only)
}

// ErrStore wraps a store's failure to commit. The loop retries the commit
// until it succeeds (storedown.go); the server does not stop.
var ErrStore = errors.New("the store could not commit")

// New loads the state, recovers jobs whose processes died with the last
// server (reaping leftovers, then requeueing or failing them), and returns
// an orchestrator ready to Run.
func New(ctx context.Context, cfg Config) (*Orchestrator, error) {
	if cfg.Store == nil || cfg.Executor == nil {
		return nil, errors.New("orchestrator: Store and Executor are required")
	}
	if cfg.CancelGrace <= 0 {
		cfg.CancelGrace = 10 * time.Second
	}
	if cfg.NodeTTL <= 0 {
		cfg.NodeTTL = 30 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = backoffBase
	}
	if cfg.Tick <= 0 {
		cfg.Tick = min(5*time.Second, cfg.NodeTTL/4)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Log == nil {
		cfg.Log = cfg.Store
	}
	o := &Orchestrator{
		cfg:       cfg,
		log:       cfg.Logger,
		ops:       make(chan *op, 1024),
		entropy:   ulid.Monotonic(rand.Reader, 0),
		jobs:      jobbook.New(arrays.Grouped), // arrays' tasks enter the snapshot by array (package arrays)
		holds:     holds.New(cfg.Limits.MaxInteractiveTime),
		gpus:      gpubook.New(),
		ledger:    sched.NewLedger(0),
		estimator: sched.NewEstimator(),
		policy:    policy.Defaults(),
		running:   true,
		changed:   make(chan struct{}),
	}
	o.sizes = sizes.New(sizes.Limits{MaxCommandBytes: cfg.Limits.MaxCommandBytes, MaxEnvBytes: cfg.Limits.MaxEnvBytes,
		MaxUserQueuedBytes: cfg.Limits.MaxUserQueuedBytes})
	o.notes = notes.New(notesBooks{o.jobs, o}, notes.Config{Notify: cfg.Notify, GPUTemp: cfg.AlertGPUTemp, QueueWait: cfg.AlertQueueWait})
	var att reclaim.Attachments
	if cfg.Attach != nil {
		att = cfg.Attach
	}
	o.reclaim = reclaim.New(cfg.Limits.MaxInteractiveTime, att)
	o.refs = newRefs(o)  // refs.go
	o.deps = newDeps(o)  // deps.go
	o.arr = newArrays(o) // arrays.go
	o.spend = spend.New(spendCluster{o.jobs, o.gpus, o}, spend.Config{Now: cfg.Now, Logger: cfg.Logger, Notes: o.notes,
		NodeTTL: cfg.NodeTTL, BudgetAction: cfg.BudgetAction})
	o.runtimes = runtimes.New(o.gpus.Nodes()) // a GPU's model
	o.bookings = bookings.New(bookingCluster{o.jobs, o.gpus, o}, bookings.Config{Allowance: cfg.BookingAllowance, PurgeAfter: cfg.PurgeAfter,
		Now: cfg.Now, Holds: o.holds, Notes: o.notes, Log: cfg.Logger})
	o.on.register(o, o.features())
	o.updates.notify = make(chan struct{}, 1)
	o.health.sig.Store(new(make(chan struct{})))
	o.news.notify = make(chan struct{}, 1)
	for _, n := range cfg.Nodes {
		n.MakeStatic(cfg.Now())
		o.gpus.Nodes().Add(n)
	}
	o.startedAt = cfg.Now()
	if err := o.recover(ctx); err != nil {
		return nil, err
	}
	o.recountLive()
	if err := o.hist.Load(ctx, o.cfg.Store, o.cfg.Now()); err != nil {
		return nil, err
	}
	o.dirty = true
	return o, nil
}

// Sink is the exec.Sink to give the executor: it queues the update for the
// loop and never blocks.
func (o *Orchestrator) Sink(u exec.Update) { o.updates.push(u) }

// Run is the loop. It returns when ctx ends. A commit that fails is
// retried until the store writes again (storedown.go): a full disk does
// not stop it.
func (o *Orchestrator) Run(ctx context.Context) error {
	ticks := o.cfg.Ticks
	if ticks == nil {
		tick := time.NewTicker(o.cfg.Tick)
		defer tick.Stop()
		ticks = tick.C
	}
	o.health.looping = true
	go o.recordHistory(ctx)
	for {
		if o.dirty && o.isRunning() {
			// Reports already waiting ride with the cycle: the GPUs of
			// jobs that ended are its to hand out, in one commit.
			o.cycle(ctx, o.updates.take())
		}
		if o.cfg.Idle != nil {
			o.cfg.Idle()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case first := <-o.ops:
			o.applyOps(ctx, drain(first, o.ops))
		case <-o.updates.notify:
			// A job that ended frees GPUs: a cycle is due, and its
			// commit carries the reports (one durable write, not two).
			if us := o.updates.take(); anyExit(us) && o.isRunning() {
				o.cycle(ctx, us)
			} else {
				o.applyUpdates(ctx, us)
			}
		case <-o.news.notify:
			o.applyNodeEvents(ctx, o.news.take())
		case <-o.limits.C():
			o.limits.Fired()
			runTick{o, o.timeLimits()}.Tick(ctx) // every attempt past its limit stopped at the limit itself, not the next tick
		case <-ticks:
			o.checkNodes(ctx) // liveness.go
			for _, t := range o.on.tick {
				t.Tick(ctx) // features.go: expiries, idle reclaim, time limits, heartbeats
			}
			o.dirty = true
		}
	}
}

// anyExit reports whether an attempt ended among the reports.
func anyExit(us []exec.Update) bool {
	for _, u := range us {
		if u.Kind == exec.Exited {
			return true
		}
	}
	return false
}

// maxBatch bounds how many operations share one commit.
const maxBatch = 512

func drain(first *op, ch chan *op) []*op {
	batch := []*op{first}
	for len(batch) < maxBatch {
		select {
		case o := <-ch:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
}

// op is one request to the loop: fn runs with the write lock held and
// records its changes in tx; the result is sent once tx is durable.
type op struct {
	fn   func(tx *txn) (any, error)
	done chan opResult
	// state settles a race between the loop taking the op and its caller
	// giving up (ctx ended): opQueued -> opTaken (the loop runs fn; the
	// caller waits for the result) or opQueued -> opAbandoned (fn never
	// runs). So a caller that gets ctx.Err() knows nothing was changed.
	state atomic.Int32
}

const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

type opResult struct {
	v   any
	err error
}

// do runs fn on the loop and waits until its changes are durable. When
// ctx ends first, fn either never runs (do returns ctx.Err()) or has
// already been taken by the loop, and do waits for its result: the
// caller always learns whether its change was made.
func (o *Orchestrator) do(ctx context.Context, fn func(tx *txn) (any, error)) (any, error) {
	if err := o.storeDownError(); err != nil {
		return nil, err // nothing was changed (storedown.go)
	}
	p := &op{fn: fn, done: make(chan opResult, 1)}
	select {
	case o.ops <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return o.await(ctx, p) // storedown.go
}

// txn collects one batch's changes: the store batch, the jobs it touched,
// and the work to do once it is durable.
type txn struct {
	o     *Orchestrator
	now   time.Time
	batch store.Batch
	dirty map[string]*api.Job
	// durable runs once the batch is committed, before anyone is
	// answered; after runs once everyone is answered.
	durable []func()
	after   []func()
	// Which op made which rows, should the store refuse some of them
	// for good (storedown.go): cur is the op whose fn runs (-1: none),
	// marks[i] the batch's row counts once op i ran, jobBy the last op
	// that touched each job. refused are the ops whose rows the store
	// could not write, with why.
	cur     int
	marks   []store.Lens
	jobBy   map[string]int
	refused map[int]error
}

func (o *Orchestrator) begin() *txn {
	return &txn{o: o, now: o.cfg.Now().UTC(), dirty: map[string]*api.Job{}, cur: -1}
}

// touch marks a job as changed so its row is written.
func (tx *txn) touch(j *api.Job) {
	tx.dirty[j.ID] = j
	if tx.cur >= 0 {
		tx.jobBy[j.ID] = tx.cur
	}
}

// transition moves a job to a new state with an event.
func (tx *txn) transition(j *api.Job, to api.State, reason, message string) {
	e := api.Event{At: tx.now, From: j.State, To: to, Reason: reason, Message: message}
	j.Events = append(j.Events, e)
	j.State, j.Reason, j.Message = to, reason, message
	tx.batch.Events = append(tx.batch.Events, store.JobEvent{JobID: j.ID, Event: e})
	tx.touch(j)
	tx.o.jobs.Moved(j) // the queue and the active set
	if to.Terminal() || to == api.StateQueued {
		tx.o.gpus.Release(j.ID, j.Allocation)
	}
	for _, m := range tx.o.on.movers { // features.go
		m.Moved(tx, j, e)
	}
	// A job that starts running frees no GPU and queues nothing: no cycle
	// could decide anything new because of it (the next one, on the next
	// change or tick, sees its start time).
	// Unless a job waits on dependencies: "after" waits for a start.
	if to != api.StateRunning || tx.o.deps.Held() > 0 {
		tx.o.dirty = true
	}
}

// commit makes the transaction durable. The write lock is held.
func (o *Orchestrator) commit(ctx context.Context, tx *txn) error {
	for _, j := range tx.dirty {
		tx.batch.Jobs = append(tx.batch.Jobs, *j)
	}
	// What follows from the changes rides with them (features.go): the
	// outbox rows of their events, the summaries of ended jobs and arrays.
	for _, c := range o.on.commit {
		c.BeforeCommit(tx)
	}
	if err := o.commitRetrying(ctx, tx); err != nil { // storedown.go
		return &api.Error{Status: 503, Code: "store_unavailable", Message: err.Error()}
	}
	for _, f := range tx.durable {
		f()
	}
	for _, c := range o.on.commit {
		c.Committed(tx) // the sender woken; ended jobs and done arrays leave memory
	}
	if !tx.batch.Empty() {
		o.notify()
	}
	return nil
}

// notify wakes everyone waiting on Changed. Write lock held.
func (o *Orchestrator) notify() {
	o.views.gen.Add(1) // views computed before are stale (queue_page.go)
	o.views.queued.Store(int64(o.jobs.Queued()))
	close(o.changed)
	o.changed = make(chan struct{})
}

// applyOps runs a batch of operations in one transaction.
func (o *Orchestrator) applyOps(ctx context.Context, ops []*op) {
	o.mu.Lock()
	tx := o.begin()
	tx.marks, tx.jobBy = make([]store.Lens, len(ops)), map[string]int{}
	results := make([]opResult, len(ops))
	for i, p := range ops {
		if p.state.CompareAndSwap(opQueued, opTaken) {
			tx.cur = i
			results[i].v, results[i].err = p.fn(tx)
			tx.cur = -1
		} // else its caller gave up before it ran
		tx.marks[i] = tx.batch.Lens()
	}
	err := o.commit(ctx, tx)
	o.mu.Unlock()
	for i, p := range ops {
		if why, ok := tx.refused[i]; ok && err == nil {
			results[i] = opResult{err: unstorableError(why)} // storedown.go
		}
		if err != nil && results[i].err == nil {
			results[i] = opResult{err: err}
		}
		p.done <- results[i]
	}
	if err == nil {
		o.runAfter(ctx, tx)
	}
}

// runAfter does a committed transaction's side effects (starting and
// stopping processes) without the lock. Failures come back as operations.
func (o *Orchestrator) runAfter(ctx context.Context, tx *txn) {
	for _, f := range tx.after {
		f()
	}
}

// Changed returns a channel closed at the next commit that changes
// anything, and after every scheduling cycle.
func (o *Orchestrator) Changed() <-chan struct{} {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.changed
}

func (o *Orchestrator) isRunning() bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.running
}

// newID returns a new sortable job id (a lowercase ULID, or Config.NewID's).
// Loop only.
func (o *Orchestrator) newID(now time.Time) string {
	if o.cfg.NewID != nil {
		return o.cfg.NewID(now)
	}
	id, err := ulid.New(ulid.Timestamp(now), o.entropy)
	if err != nil {
		// The monotonic entropy overflowed within one millisecond: use the
		// next millisecond.
		id = ulid.MustNew(ulid.Timestamp(now)+1, rand.Reader)
	}
	return "j" + lower(id.String())
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// LogPath is where the given attempt of a job writes its output.
func (o *Orchestrator) LogPath(jobID string, attempt int) string {
	return o.attemptPath(jobID, attempt, ".log")
}

// attemptPath is a file of one attempt of a job: DataDir/logs/JOB/N.ext.
func (o *Orchestrator) attemptPath(jobID string, attempt int, ext string) string {
	return filepath.Join(o.cfg.DataDir, "logs", jobID, strconv.Itoa(attempt)+ext)
}

// queue hands items (executor updates, node news) to the loop without
// blocking the sender.
type queue[T any] struct {
	mu     sync.Mutex
	items  []T
	notify chan struct{}
}

func (q *queue[T]) push(u T) {
	q.mu.Lock()
	q.items = append(q.items, u)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *queue[T]) take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}
