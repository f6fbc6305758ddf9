package notes

import (
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/notify"
)

// DefaultGPUTemp is the GPU temperature (Celsius) at or above which an
// admin alert is raised, unless Config.GPUTemp says otherwise.
const DefaultGPUTemp = 90

// QueueWaitFor is how long the queue wait p95 must stay above
// Config.QueueWait before an admin alert is raised.
const QueueWaitFor = 15 * time.Minute

// gpuAlerts remembers what was told about a node's GPUs, so each alert is
// raised once per episode.
type gpuAlerts struct {
	hot     map[int]bool  // GPUs told to be over temperature
	ecc     map[int]int64 // uncorrected ECC counts last told
	foreign map[int]bool  // foreign PIDs told about
}

// NodeReadings raises admin alerts from node's report: a GPU over the
// temperature threshold (again after it cooled down), ECC errors that
// rose, a foreign process not seen before.
func (n *Notes) NodeReadings(node string, readings []api.GPUReading, foreign []api.ForeignProcess, at time.Time) {
	if !n.On() {
		return
	}
	if n.gpus == nil {
		n.gpus = map[string]*gpuAlerts{}
	}
	g := n.gpus[node]
	if g == nil {
		g = &gpuAlerts{hot: map[int]bool{}, ecc: map[int]int64{}, foreign: map[int]bool{}}
		n.gpus[node] = g
	}
	limit := n.cfg.GPUTemp
	if limit <= 0 {
		limit = DefaultGPUTemp
	}
	for _, r := range readings {
		idx := r.Index
		switch hot := r.Temperature != nil && *r.Temperature >= limit; {
		case hot && !g.hot[idx]:
			g.hot[idx] = true
			n.Alert(notify.AlertGPUTemperature, at, node, &idx, "GPU %d of node %s is at %d°C (alert at %d°C)", idx, node, *r.Temperature, limit)
		case !hot && r.Temperature != nil:
			delete(g.hot, idx)
		}
		if r.ECCErrors > g.ecc[idx] {
			n.Alert(notify.AlertGPUECC, at, node, &idx, "GPU %d of node %s reports %d uncorrected ECC errors", idx, node, r.ECCErrors)
		}
		g.ecc[idx] = r.ECCErrors
	}
	seen := map[int]bool{}
	for _, f := range foreign {
		seen[f.PID] = true
		if !g.foreign[f.PID] {
			gpu := f.GPU
			n.Alert(notify.AlertForeignProcess, at, node, &gpu, "a process Corral did not start is on GPU %d of node %s: pid %d (%s, user %s); the GPU is not handed out while it runs",
				f.GPU, node, f.PID, f.Name, f.User)
		}
	}
	g.foreign = seen
}

// CheckQueueWait raises alert.queue_wait once the queue wait p95 has
// stayed above Config.QueueWait for QueueWaitFor, and again only after it
// has dropped below.
func (n *Notes) CheckQueueWait(now time.Time) {
	if !n.On() || n.cfg.QueueWait <= 0 {
		return
	}
	p95 := queueWaitP95(n.books, now)
	q := &n.queueWait
	if p95 <= n.cfg.QueueWait {
		q.since, q.told = time.Time{}, false
		return
	}
	if q.since.IsZero() {
		q.since = now
	}
	if !q.told && now.Sub(q.since) >= QueueWaitFor {
		q.told = true
		n.Alert(notify.AlertQueueWait, now, "", nil, "the queue wait p95 is %s, above %s, and has been since %s",
			p95.Round(time.Second), n.cfg.QueueWait, q.since.UTC().Format(time.RFC3339))
	}
}

// queueWaitP95 is the p95 of the waits of the jobs started in the last 24
// hours and of the jobs queued now (their wait so far, so that a queue
// where nothing starts counts too).
func queueWaitP95(b Books, now time.Time) time.Duration {
	var waits []float64
	dayAgo := now.Add(-24 * time.Hour)
	for queued, started := range b.QueueWaits() {
		switch {
		case started.IsZero():
			waits = append(waits, now.Sub(queued).Seconds())
		case !started.Before(dayAgo):
			waits = append(waits, started.Sub(queued).Seconds())
		}
	}
	if len(waits) == 0 {
		return 0
	}
	slices.Sort(waits)
	i := int(float64(len(waits))*95/100+0.5) - 1
	return time.Duration(waits[min(max(i, 0), len(waits)-1)] * float64(time.Second))
}

// Flush is the notifications' tick (feature.TxTicker): the queue wait
// compared with Config.QueueWait, and what was noted since the last
// commit committed when nothing else has (scheduling stopped, no job
// changing): only the loop makes a transaction.
type Flush struct {
	Notes *Notes
	Now   func() time.Time // the orchestrator's clock, read at each tick
}

// TickTx checks the queue wait at Now; it reports whether notifications
// wait to be committed.
func (f Flush) TickTx(feature.Tx) bool {
	f.Notes.CheckQueueWait(f.Now())
	return f.Notes.Pending()
}

// TickName names the notifications' tick in the log.
func (f Flush) TickName() string { return "notifications" }
