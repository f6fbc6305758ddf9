package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// settingAliveAt is the store key of the last moment the server knew its
// running attempts alive (RFC 3339, UTC), committed every tick while any
// job holds GPUs. Attempts lost with the server are charged up to it.
const settingAliveAt = "alive_at"

// usageBooks is the orchestrator's side of the usage ledger (issue 14).
// Loop only, under the write lock; readers take the read lock.
type usageBooks struct {
	aliveAt  time.Time // the last heartbeat committed (or read at start-up)
	lastBeat time.Time // when the loop last committed one

	// used integrates each holder's (job or hold id) GPU utilization
	// readings, per node, since its attempt began: utilization/100 x
	// seconds. lastRead is when each GPU was last read.
	used     map[string]map[string]float64
	lastRead map[gpuKey]time.Time

	// totals are all-time GPU-seconds and dollars per user and project,
	// for the Prometheus counters; month is month-to-date per user and
	// project, for budgets (budgets.go).
	totals map[userProject]*spend
	month  monthBooks

	prices usage.Prices // dollars per GPU-hour by model (prices.go)
	budget budgetBooks  // budgets.go
}

type userProject struct{ user, project string }

// spend is GPU-seconds and their cost at the prices of when they were
// charged.
type spend struct {
	GPUSeconds float64
	Dollars    float64
}

// txnUsage is a transaction's ledger rows still waiting for the reason
// their attempt ended: the index in batch.Usage of each, by job id.
type txnUsage struct {
	open map[string][]int
}

func (u *usageBooks) init() {
	u.used = map[string]map[string]float64{}
	u.lastRead = map[gpuKey]time.Time{}
	u.totals = map[userProject]*spend{}
	u.prices = usage.Prices{}
	u.month.init(time.Time{})
	u.budget.init()
}

// recordKind is the ledger kind of a job's attempts.
func recordKind(j *api.Job) string {
	if j.Class == api.ClassInteractive || j.Class == api.ClassInteractivePreemptible || j.Hold != "" {
		return usage.KindInteractive
	}
	return usage.KindJob
}

// gpuModel is the model of a node's GPU ("" when unknown).
func (o *Orchestrator) gpuModel(nodeID string, gpu int) string {
	n := o.node(nodeID)
	if n == nil {
		return ""
	}
	for _, d := range n.Devices {
		if d.Index == gpu {
			return d.Model
		}
	}
	return n.model()
}

// attemptRecords splits an attempt [start, end) over its nodes: one record
// per node, in allocation order. The reason is left for settleUsage.
func (o *Orchestrator) attemptRecords(kind, id string, attempt int, user, project string, alloc []api.Allocation, start, end time.Time) []usage.Record {
	var out []usage.Record
	at := map[string]int{}
	for _, a := range alloc {
		i, ok := at[a.NodeID]
		if !ok {
			i = len(out)
			at[a.NodeID] = i
			out = append(out, usage.Record{Kind: kind, ID: id, Attempt: attempt, User: user, Project: project,
				GPUModel: o.gpuModel(a.NodeID, a.GPUID), Node: a.NodeID, Start: start, End: end})
		}
		out[i].GPUs++
	}
	used := o.use.used[id]
	for i := range out {
		out[i].GPUSeconds = float64(out[i].GPUs) * end.Sub(start).Seconds()
		out[i].UsedGPUSeconds = min(used[out[i].Node], out[i].GPUSeconds)
	}
	delete(o.use.used, id)
	return out
}

// chargeAttempt writes the ledger rows of a job's attempt that ends at
// end, in tx; the reason of the job's next transition in tx is how it
// ended (settleUsage). From endAttempt, write lock held.
func (o *Orchestrator) chargeAttempt(tx *txn, j *api.Job, end time.Time) {
	if j.StartedAt == nil || !end.After(*j.StartedAt) {
		return
	}
	recs := o.attemptRecords(recordKind(j), j.ID, j.RetryCount, j.User, j.Project, j.Allocation, *j.StartedAt, end)
	if tx.use.open == nil {
		tx.use.open = map[string][]int{}
	}
	for _, r := range recs {
		tx.use.open[j.ID] = append(tx.use.open[j.ID], len(tx.batch.Usage))
		o.chargeUsage(tx, r)
	}
}

// settleUsage gives the job's rows waiting in tx the reason of its
// transition (j.State is already the new state), and forgets the
// utilization of a job that no longer holds GPUs. From txn.transition.
func (tx *txn) settleUsage(j *api.Job, reason string) {
	if !j.State.Active() {
		delete(tx.o.use.used, j.ID) // readings of an attempt that never started
	}
	idx, ok := tx.use.open[j.ID]
	if !ok {
		return
	}
	for _, i := range idx {
		tx.batch.Usage[i].Ended = reason
	}
	delete(tx.use.open, j.ID)
}

// chargeUsage adds one ledger row to tx and to the in-memory totals
// (metrics, month-to-date for budgets). It is the one way into the
// ledger: attempts, holds, and booked-but-idle time (a booking's hook
// calls it with a usage.KindBookingIdle record) all come through here.
// A record that is not valid is logged and dropped. Write lock held.
func (o *Orchestrator) chargeUsage(tx *txn, r usage.Record) {
	if err := r.Valid(); err != nil {
		o.log.Error("usage record dropped", "err", err, "id", r.ID)
		return
	}
	tx.batch.Usage = append(tx.batch.Usage, r)
	o.countUsage(r)
	o.checkBudgets(tx, r) // budgets.go
}

// countUsage adds a live record to the all-time and month-to-date
// totals.
func (o *Orchestrator) countUsage(r usage.Record) {
	price, _ := o.use.prices.For(r.GPUModel)
	o.addTotal(r.User, r.Project, r.GPUSeconds, r.GPUSeconds/3600*price)
	o.use.month.add(r, price)
}

func (o *Orchestrator) addTotal(user, project string, gpuSeconds, dollars float64) {
	k := userProject{user, project}
	s := o.use.totals[k]
	if s == nil {
		s = &spend{}
		o.use.totals[k] = s
	}
	s.GPUSeconds += gpuSeconds
	s.Dollars += dollars
}

// chargeHoldUsage writes the ledger rows of a hold that ends now. From
// releaseHold, write lock held.
func (o *Orchestrator) chargeHoldUsage(tx *txn, h *api.Hold, ended string) {
	if !tx.now.After(h.HeldAt) {
		return
	}
	for _, r := range o.attemptRecords(usage.KindHold, h.JobID, 0, h.User, holds.Project, h.Allocation, h.HeldAt, tx.now) {
		r.Ended = ended
		o.chargeUsage(tx, r)
	}
}

// chargeLostAttempt charges an attempt lost with the previous server up
// to the last moment that server knew it alive (settingAliveAt), to the
// job and in the ledger, in tx. From recover, before the job's
// transition (which gives the rows their reason).
func (o *Orchestrator) chargeLostAttempt(tx *txn, j *api.Job) {
	if j.StartedAt == nil || !o.use.aliveAt.After(*j.StartedAt) {
		return
	}
	end := o.use.aliveAt
	j.GPUSeconds += float64(len(j.Allocation)) * end.Sub(*j.StartedAt).Seconds() // rebuildLedger counts it
	o.chargeAttempt(tx, j, end)
}

// heartbeat commits settingAliveAt while any job holds GPUs, at most once
// a tick, after the budgets have looked at the running attempts. Loop
// only; a failed write is logged (the next tick tries again).
func (o *Orchestrator) heartbeat(ctx context.Context) {
	o.checkBudgetsRunning(ctx) // budgets.go: running attempts count in budgets
	o.mu.RLock()
	busy := len(o.active) > 0
	o.mu.RUnlock()
	now := o.cfg.Now().UTC()
	if !busy {
		return
	}
	b := &store.Batch{Settings: map[string]string{settingAliveAt: now.Format(time.RFC3339Nano)}}
	if err := o.cfg.Log.Commit(ctx, b); err != nil {
		o.log.Debug("heartbeat not committed", "err", err)
		return
	}
	o.mu.Lock()
	o.use.aliveAt, o.use.lastBeat = now, now
	o.mu.Unlock()
}

// integrateReadings adds a node's GPU utilization readings to the usage
// of whatever holds each GPU (job or hold), over the time since that GPU's
// previous reading (at most 2 node TTLs: a longer silence counts nothing).
// From applyNodeEvents, write lock held.
func (o *Orchestrator) integrateReadings(n *Node, readings []api.GPUReading, at time.Time) {
	for _, r := range readings {
		k := gpuKey{n.ID, r.Index}
		last, seen := o.use.lastRead[k]
		o.use.lastRead[k] = at
		holder := o.owner[k]
		if !seen || holder == "" || !at.After(last) {
			continue
		}
		dt := at.Sub(last)
		if dt > 2*o.cfg.NodeTTL {
			continue
		}
		m := o.use.used[holder]
		if m == nil {
			m = map[string]float64{}
			o.use.used[holder] = m
		}
		m[n.ID] += float64(min(max(r.Utilization, 0), 100)) / 100 * dt.Seconds()
	}
}

// readUsageState reads the heartbeat, prices and budgets from the stored
// settings, and the ledger's totals from the store. From recover.
func (o *Orchestrator) readUsageState(ctx context.Context, settings map[string]string) error {
	o.use.init()
	if raw := settings[settingAliveAt]; raw != "" {
		if t, err := time.Parse(time.RFC3339Nano, raw); err == nil {
			o.use.aliveAt = t
		}
	}
	o.readPrices(settings)  // prices.go
	o.readBudgets(settings) // budgets.go
	now := o.cfg.Now().UTC()
	o.use.month.init(now)
	totals, err := o.cfg.Store.UsageTotals(ctx)
	if err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	for _, t := range totals {
		price, _ := o.use.prices.For(t.GPUModel)
		o.addTotal(t.User, t.Project, t.GPUSeconds, t.GPUSeconds/3600*price)
	}
	recs, err := o.cfg.Store.UsageRecords(ctx, o.use.month.start, time.Time{})
	if err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	for _, r := range recs {
		price, _ := o.use.prices.For(r.GPUModel)
		o.use.month.add(r, price)
	}
	o.use.budget.catchUp(o.use.month) // budgets.go: what was already noted this month
	return nil
}

// UsageQuery is what GET /usage asks.
type UsageQuery struct {
	By           string    // usage.ByUser (default), ByProject, ByGPUType, ByNode, ByWeek
	Since, Until time.Time // zero: open
	User         string    // non-empty: only this user's records (a user's own view)
}

// Usage reports the ledger over the window, grouped and priced at today's
// prices. It reads the store, not memory. Bad input is an *api.Error
// naming the field.
func (o *Orchestrator) Usage(ctx context.Context, q UsageQuery) (usage.Report, error) {
	if q.By == "" {
		q.By = usage.ByUser
	}
	if !usage.ValidBy(q.By) {
		return usage.Report{}, api.Invalid("by", "%q is not one of %v", q.By, usage.ByValues)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return usage.Report{}, api.Invalid("until", "%s is not after since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	recs, err := o.cfg.Store.UsageRecords(ctx, q.Since, q.Until)
	if err != nil {
		return usage.Report{}, err
	}
	if q.User != "" {
		mine := recs[:0]
		for _, r := range recs {
			if r.User == q.User {
				mine = append(mine, r)
			}
		}
		recs = mine
	}
	return usage.Aggregate(recs, q.By, q.Since, q.Until, o.Prices()), nil
}

// UsageTotal is one user's and project's all-time charge, for metrics.
type UsageTotal struct {
	User, Project string
	GPUSeconds    float64
	Dollars       float64
}

// UsageTotals returns the all-time totals per user and project.
func (o *Orchestrator) UsageTotals() []UsageTotal {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make([]UsageTotal, 0, len(o.use.totals))
	for k, s := range o.use.totals {
		out = append(out, UsageTotal{User: k.user, Project: k.project, GPUSeconds: s.GPUSeconds, Dollars: s.Dollars})
	}
	return out
}

// chargeUsage adds one ledger row to the transaction: the entry point for
// other parts' charges (o.chargeUsage). Write lock held.
func (tx *txn) chargeUsage(r usage.Record) { tx.o.chargeUsage(tx, r) }

// chargeBookingIdle charges a booking's GPU time left idle to its booker
// (Owner), in its project: gpuSeconds spread over the booking's nodes by
// their GPUs, as kind booking_idle rows with ID the booking's name and
// Attempt the occurrence's start (Unix seconds), so an occurrence charged
// twice is one row per node in the store (call it once per occurrence all
// the same: the in-memory totals behind the metrics and budgets would
// count a second call again). The rows span the occurrence's [Start, End],
// clipped to now. Called when a window closes (bookings_tick.go). Write
// lock held.
func (tx *txn) chargeBookingIdle(r *api.Reservation, gpuSeconds float64) {
	if r == nil || gpuSeconds <= 0 {
		return
	}
	end := r.End
	if tx.now.Before(end) {
		end = tx.now
	}
	if end.Before(r.Start) {
		end = r.Start
	}
	recs := tx.o.attemptRecords(usage.KindBookingIdle, r.Name, int(r.Start.Unix()), r.Owner, r.Project, r.Allocation, r.Start, end)
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
		tx.chargeUsage(rec)
	}
}
