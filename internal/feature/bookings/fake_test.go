package bookings

import (
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/notify"
)

// fakeCluster is the orchestrator's books as the feature sees them.
type fakeCluster struct {
	jobs    map[string]*api.Job // in memory
	ended   map[string]*api.Job // recently ended, out of jobs
	active  map[string]bool
	nodes   nodebook.Book
	grace   time.Duration
	charged map[string]float64 // idle GPU-seconds charged, by booking
	replans int
}

func newCluster(nodes ...nodebook.Node) *fakeCluster {
	c := &fakeCluster{jobs: map[string]*api.Job{}, ended: map[string]*api.Job{}, active: map[string]bool{},
		grace: 30 * time.Second, charged: map[string]float64{}}
	for _, n := range nodes {
		c.nodes.Add(n)
	}
	return c
}

func (c *fakeCluster) Get(id string) *api.Job { return c.jobs[id] }
func (c *fakeCluster) Lookup(id string) (*api.Job, bool) {
	if j, ok := c.jobs[id]; ok {
		return j, true
	}
	j, ok := c.ended[id]
	return j, ok
}
func (c *fakeCluster) IsActive(id string) bool     { return c.active[id] }
func (c *fakeCluster) ActiveIDs() iter.Seq[string] { return maps.Keys(c.active) }
func (c *fakeCluster) PreemptGrace() time.Duration { return c.grace }
func (c *fakeCluster) Replan()                     { c.replans++ }
func (c *fakeCluster) Nodes() *nodebook.Book       { return &c.nodes }
func (c *fakeCluster) SortedActiveIDs() []string {
	ids := make([]string, 0, len(c.active))
	for id := range c.active {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
func (c *fakeCluster) ChargeIdle(_ feature.Tx, r *api.Reservation, gpuSeconds float64) {
	if gpuSeconds > 0 {
		c.charged[r.Name] += gpuSeconds
	}
}

// run puts job j on the GPUs of as, running since at.
func (c *fakeCluster) run(j *api.Job, at time.Time, as ...api.Allocation) {
	j.State, j.StartedAt, j.Allocation = api.StateRunning, &at, as
	c.jobs[j.ID], c.active[j.ID] = j, true
}

// end ends job j at `at`: it leaves memory for the recently ended.
func (c *fakeCluster) end(id string, at time.Time) {
	j := c.jobs[id]
	j.State, j.FinishedAt = api.StateCompleted, &at
	delete(c.jobs, id)
	delete(c.active, id)
	c.ended[id] = j
}

// node is a node of n GPUs of model.
func node(id, model string, n int) nodebook.Node {
	nd := nodebook.Node{ID: id}
	for i := range n {
		nd.Devices = append(nd.Devices, gpuinfo.Device{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", id, i), Model: model, MemoryMiB: 80 * 1024, Simulated: true})
	}
	return nd
}

// fakeTx is a transaction: its time and batch.

// noter keeps the notifications noted.
type noter struct{ evs []notify.Event }

func (n *noter) On() bool             { return true }
func (n *noter) Note(ev notify.Event) { n.evs = append(n.evs, ev) }

// newBooks returns books over c with a clock at *now and no logs.
func newBooks(c *fakeCluster, now *time.Time, cfg Config) *Books {
	cfg.Now = func() time.Time { return *now }
	if cfg.Holds == nil {
		cfg.Holds = holds.New(0)
	}
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(c, cfg)
}
