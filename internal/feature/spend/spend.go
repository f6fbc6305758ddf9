// Package spend is the usage ledger with its budgets and prices, a
// feature of the orchestrator's loop: each attempt's GPU time (and each
// hold's, and a booking's idle time) becomes ledger rows written in the
// transaction that ends it; the month-to-date spend counts against
// budgets, whose thresholds are noted for notification and whose action
// holds a user's queued jobs (QueueGate) or makes new ones preemptible
// (SubmitCheck); prices turn GPU time into dollars. The rows and the
// report types are package usage's.
//
//	attempt ends ─▶ ChargeAttempt ─▶ batch.Usage ─▶ Moved (how it ended)
//	                      └─▶ totals, month ─▶ budgets ─▶ noted, held
//
// What it reads of the orchestrator's books (the running jobs, GPU
// models and holders) comes through Cluster. Its methods are called with
// the orchestrator's lock held (the write lock, but for the reads that
// say so); it never takes that lock and makes no transaction of its own:
// the orchestrator commits the heartbeat (AliveSetting, Beat) and opens
// the transactions it is handed.
package spend

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// settingAliveAt is the store key of the last moment the server knew its
// running attempts alive (RFC 3339, UTC), committed every tick while any
// job holds GPUs. Attempts lost with the server are charged up to it.
const settingAliveAt = "alive_at"

// Cluster is what the feature reads of the orchestrator's books, and the
// one thing it asks of the loop. Its methods are called with the
// orchestrator's lock held, from the feature's own methods only.
type Cluster interface {
	// GPUModel is the model of a node's GPU ("" when unknown).
	GPUModel(node string, gpu int) string
	// Owner is the job or hold that owns a node's GPU ("" for none).
	Owner(node string, gpu int) string
	// Active yields the jobs that hold GPUs or are starting, in no
	// order.
	Active() iter.Seq[*api.Job]
	// Reschedule asks for a scheduling cycle: a budget's action changed
	// what may start. Write lock held.
	Reschedule()
}

// Noter notes a notification for the next commit (package notes).
type Noter interface {
	On() bool
	Note(ev notify.Event)
}

// Ledger is what the feature reads of the stored ledger.
type Ledger interface {
	UsageTotals(ctx context.Context) ([]store.UsageTotal, error)
	UsageRecords(ctx context.Context, since, until time.Time) ([]usage.Record, error)
}

// Config is what the feature is built with.
type Config struct {
	Now    func() time.Time // the server's clock
	Logger *slog.Logger
	Notes  Noter // budgets' thresholds are noted here; nil: none
	// NodeTTL bounds the silence between two utilization readings that
	// still counts: 2 TTLs.
	NodeTTL time.Duration
	// BudgetAction is the action of budgets that name none ("" or not
	// valid: notify).
	BudgetAction string
}

// Books are the ledger's live side: the utilization of running attempts,
// the totals behind the metrics, the month-to-date spend, the prices and
// the budgets. The feature's moments: SubmitCheck, Mover, Committer,
// QueueGate.
type Books struct {
	cluster Cluster
	cfg     Config
	log     *slog.Logger

	aliveAt time.Time // the last heartbeat committed (or read at start-up)

	// used integrates each holder's (job or hold id) GPU utilization
	// readings, per node, since its attempt began: utilization/100 x
	// seconds. lastRead is when each GPU was last read.
	used     map[string]map[string]float64
	lastRead map[gpuKey]time.Time

	// totals are all-time GPU-seconds and dollars per user and project,
	// for the Prometheus counters; month is month-to-date per user and
	// project, for budgets (budgets.go).
	totals map[userProject]*usage.Spend
	month  monthBooks

	prices usage.Prices // dollars per GPU-hour by model (prices.go)
	budget budgetBooks  // budgets.go

	// open are the ledger rows of openTx still waiting for the reason
	// their attempt ended: the index in its batch's Usage of each, by
	// job id. Moved settles them; Committed forgets them.
	open   map[string][]int
	openTx feature.Tx
}

type gpuKey struct {
	node  string
	index int
}

type userProject struct{ user, project string }

// New returns empty books reading cluster.
func New(cluster Cluster, cfg Config) *Books {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	b := &Books{cluster: cluster, cfg: cfg, log: cfg.Logger}
	b.init()
	return b
}

func (b *Books) init() {
	b.used = map[string]map[string]float64{}
	b.lastRead = map[gpuKey]time.Time{}
	b.totals = map[userProject]*usage.Spend{}
	b.prices = usage.Prices{}
	b.month.init(time.Time{})
	b.budget.init()
}

// Load reads the heartbeat, prices and budgets from the stored settings,
// and the ledger's totals from the store, at start-up.
func (b *Books) Load(ctx context.Context, settings map[string]string, st Ledger) error {
	b.init()
	if raw := settings[settingAliveAt]; raw != "" {
		if t, err := time.Parse(time.RFC3339Nano, raw); err == nil {
			b.aliveAt = t
		}
	}
	b.readPrices(settings)  // prices.go
	b.readBudgets(settings) // budgets.go
	now := b.cfg.Now().UTC()
	b.month.init(now)
	totals, err := st.UsageTotals(ctx)
	if err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	for _, t := range totals {
		price, _ := b.prices.For(t.GPUModel)
		b.addTotal(t.User, t.Project, t.GPUSeconds, t.GPUSeconds/3600*price)
	}
	recs, err := st.UsageRecords(ctx, b.month.start, time.Time{})
	if err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	for _, r := range recs {
		price, _ := b.prices.For(r.GPUModel)
		b.month.add(r, price)
	}
	return nil
}

// recordKind is the ledger kind of a job's attempts.
func recordKind(j *api.Job) string {
	if j.Class == api.ClassInteractive || j.Class == api.ClassInteractivePreemptible || j.Hold != "" {
		return usage.KindInteractive
	}
	return usage.KindJob
}

// attemptRecords splits an attempt [start, end) over its nodes: one record
// per node, in allocation order, charged in GPU-equivalents (a slice or
// share its part of the GPU: api.Allocation.Equivalents), and forgets the holder's utilization.
// The reason is left for Moved.
func (b *Books) attemptRecords(kind, id string, attempt int, user, project string, alloc []api.Allocation, start, end time.Time) []usage.Record {
	var out []usage.Record
	var eq []float64 // GPU-equivalents per record
	at := map[string]int{}
	for _, a := range alloc {
		i, ok := at[a.NodeID]
		if !ok {
			i = len(out)
			at[a.NodeID] = i
			out = append(out, usage.Record{Kind: kind, ID: id, Attempt: attempt, User: user, Project: project,
				GPUModel: b.cluster.GPUModel(a.NodeID, a.GPUID), Node: a.NodeID, Start: start, End: end})
		}
		out[i].GPUs++
		for len(eq) <= i {
			eq = append(eq, 0)
		}
		eq[i] += a.Equivalents() // a MIG slice or MPS share: its part of the GPU
	}
	used := b.used[id]
	for i := range out {
		out[i].GPUSeconds = eq[i] * end.Sub(start).Seconds()
		out[i].UsedGPUSeconds = min(used[out[i].Node], out[i].GPUSeconds)
	}
	delete(b.used, id)
	return out
}

// ChargeAttempt writes the ledger rows of a job's attempt that ends at
// end, in tx; the reason of the job's next transition in tx is how it
// ended (Moved).
func (b *Books) ChargeAttempt(tx feature.Tx, j *api.Job, end time.Time) {
	if j.StartedAt == nil || !end.After(*j.StartedAt) {
		return
	}
	recs := b.attemptRecords(recordKind(j), j.ID, j.RetryCount, j.User, j.Project, j.Allocation, *j.StartedAt, end)
	if b.openTx != tx {
		b.openTx = tx
		clear(b.open)
	}
	if b.open == nil {
		b.open = map[string][]int{}
	}
	for _, r := range recs {
		b.open[j.ID] = append(b.open[j.ID], len(tx.Batch().Usage))
		b.Charge(tx, r)
	}
}

// ChargeLost charges an attempt lost with the previous server up to the
// last moment that server knew it alive (AliveAt): to the job (its
// GPUSeconds, in GPU equivalents: a slice or share counts its part) and
// in the ledger, in tx. Nothing when the attempt started after that
// moment. At recovery, before the job's transition, which gives the rows
// their reason.
func (b *Books) ChargeLost(tx feature.Tx, j *api.Job) {
	end := b.aliveAt
	if j.StartedAt == nil || !end.After(*j.StartedAt) {
		return
	}
	eq := 0.0
	for i := range j.Allocation {
		eq += j.Allocation[i].Equivalents()
	}
	j.GPUSeconds += eq * end.Sub(*j.StartedAt).Seconds()
	b.ChargeAttempt(tx, j, end)
}

// Moved gives the job's rows waiting in tx the reason of its transition
// (j.State is already the new state), and forgets the utilization of a
// job that no longer holds GPUs (feature.Mover).
func (b *Books) Moved(tx feature.Tx, j *api.Job, e api.Event) {
	if !j.State.Active() {
		delete(b.used, j.ID) // readings of an attempt that never started
	}
	if b.openTx != tx {
		return
	}
	idx, ok := b.open[j.ID]
	if !ok {
		return
	}
	batch := tx.Batch()
	for _, i := range idx {
		batch.Usage[i].Ended = e.Reason
	}
	delete(b.open, j.ID)
}

// BeforeCommit does nothing: the rows are in the batch already
// (feature.Committer).
func (b *Books) BeforeCommit(feature.Tx) {}

// Committed forgets the rows of tx that no transition settled.
func (b *Books) Committed(tx feature.Tx) {
	if b.openTx == tx {
		b.openTx = nil
		clear(b.open)
	}
}

// Charge adds one ledger row to tx and to the in-memory totals (metrics,
// month-to-date for budgets). It is the one way into the ledger:
// attempts, holds, and booked-but-idle time all come through here. A
// record that is not valid is logged and dropped.
func (b *Books) Charge(tx feature.Tx, r usage.Record) {
	if err := r.Valid(); err != nil {
		b.log.Error("usage record dropped", "err", err, "id", r.ID)
		return
	}
	batch := tx.Batch()
	batch.Usage = append(batch.Usage, r)
	b.count(r)
	b.checkBudgets(tx, r) // budgets.go
}

// count adds a live record to the all-time and month-to-date totals.
func (b *Books) count(r usage.Record) {
	price, _ := b.prices.For(r.GPUModel)
	b.addTotal(r.User, r.Project, r.GPUSeconds, r.GPUSeconds/3600*price)
	b.month.add(r, price)
}

func (b *Books) addTotal(user, project string, gpuSeconds, dollars float64) {
	k := userProject{user, project}
	s := b.totals[k]
	if s == nil {
		s = &usage.Spend{}
		b.totals[k] = s
	}
	s.GPUSeconds += gpuSeconds
	s.Dollars += dollars
}

// ChargeHold writes the ledger rows of a hold that ends at tx's time, in
// project (holds name none of their own).
func (b *Books) ChargeHold(tx feature.Tx, h *api.Hold, project, ended string) {
	now := tx.Now()
	if !now.After(h.HeldAt) {
		return
	}
	for _, r := range b.attemptRecords(usage.KindHold, h.JobID, 0, h.User, project, h.Allocation, h.HeldAt, now) {
		r.Ended = ended
		b.Charge(tx, r)
	}
}

// ChargeBookingIdle charges a booking's GPU time left idle to its booker
// (Owner), in its project: gpuSeconds spread over the booking's nodes by
// their GPUs, as kind booking_idle rows with ID the booking's name and
// Attempt the occurrence's start (Unix seconds), so an occurrence charged
// twice is one row per node in the store (call it once per occurrence all
// the same: the in-memory totals behind the metrics and budgets would
// count a second call again). The rows span the occurrence's [Start, End],
// clipped to tx's time.
func (b *Books) ChargeBookingIdle(tx feature.Tx, r *api.Reservation, gpuSeconds float64) {
	if r == nil || gpuSeconds <= 0 {
		return
	}
	end := r.End
	if now := tx.Now(); now.Before(end) {
		end = now
	}
	if end.Before(r.Start) {
		end = r.Start
	}
	recs := b.attemptRecords(usage.KindBookingIdle, r.Name, int(r.Start.Unix()), r.Owner, r.Project, r.Allocation, r.Start, end)
	if len(recs) == 0 { // no GPUs chosen: one row, no node
		recs = []usage.Record{{Kind: usage.KindBookingIdle, ID: r.Name, Attempt: int(r.Start.Unix()), User: r.Owner, Project: r.Project,
			GPUModel: r.GPUType, GPUs: r.GPUs, Start: r.Start, End: end}}
	}
	total := 0
	for _, rec := range recs {
		total += max(rec.GPUs, 1)
	}
	for _, rec := range recs {
		rec.GPUSeconds = gpuSeconds * float64(max(rec.GPUs, 1)) / float64(total)
		rec.UsedGPUSeconds = 0
		rec.Ended = "idle"
		b.Charge(tx, rec)
	}
}

// AliveAt is the last moment the server (this one, or the one before it)
// knew its running attempts alive: attempts lost with the server are
// charged up to it.
func (b *Books) AliveAt() time.Time { return b.aliveAt }

// AliveSetting is the setting a heartbeat at now commits.
func AliveSetting(now time.Time) map[string]string {
	return map[string]string{settingAliveAt: now.Format(time.RFC3339Nano)}
}

// Beat records that a heartbeat at now was committed.
func (b *Books) Beat(now time.Time) { b.aliveAt = now }

// IntegrateReadings adds a node's GPU utilization readings to the usage
// of whatever holds each GPU (job or hold), over the time since that GPU's
// previous reading (at most 2 node TTLs: a longer silence counts nothing).
func (b *Books) IntegrateReadings(node string, readings []api.GPUReading, at time.Time) {
	for _, r := range readings {
		k := gpuKey{node, r.Index}
		last, seen := b.lastRead[k]
		b.lastRead[k] = at
		holder := b.cluster.Owner(node, r.Index)
		if !seen || holder == "" || !at.After(last) {
			continue
		}
		dt := at.Sub(last)
		if dt > 2*b.cfg.NodeTTL {
			continue
		}
		m := b.used[holder]
		if m == nil {
			m = map[string]float64{}
			b.used[holder] = m
		}
		m[node] += float64(min(max(r.Utilization, 0), 100)) / 100 * dt.Seconds()
	}
}

// Used is the GPU-seconds of utilization integrated so far for holder
// id's attempt on node. Read lock held.
func (b *Books) Used(id, node string) float64 { return b.used[id][node] }
