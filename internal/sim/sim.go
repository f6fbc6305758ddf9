package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/sched"
)

// Estimate modes: what the scheduler is told about a job's run time.
const (
	EstimatesExact  = "exact"  // the true duration
	EstimatesNoisy  = "noisy"  // the true duration times a lognormal factor
	EstimatesAbsent = "absent" // nothing: the core learns per-user means, else the policy default
	// EstimatesLearned: a sched.Predictor fed with the replay's own
	// completions; backfill plans on the high end of its range. A job
	// with too little history gets none (the policy default, and it is
	// not backfilled onto reserved GPUs).
	EstimatesLearned = "learned"
)

// Config is one simulation: the cluster, the policy and the estimates.
type Config struct {
	Nodes    int // nodes in the cluster
	NodeGPUs int // GPUs per node
	// GPUModel and GPUMemoryMiB describe every simulated GPU.
	GPUModel     string
	GPUMemoryMiB int64
	// Policy is the core's policy (name, backfill, preemption, knobs), as
	// the server would pass it.
	Policy sched.Policy
	// Estimates is one of the Estimates* modes; "" means exact. A JSONL
	// job's own estimate_s is used as given in every mode but absent.
	Estimates string
	// NoiseSigma is the sigma of the lognormal factor of noisy estimates
	// (default 0.5: half the estimates are off by more than x1.4 either way).
	NoiseSigma float64
	// Seed seeds the noise; the same seed gives the same estimates.
	Seed uint64
	// PreemptGrace is how long a preempted job runs on after it is told to
	// stop (the server's preempt_grace; default 30s, negative: none).
	PreemptGrace time.Duration
	// Series records queue length and allocated GPUs at every event, for
	// plots.
	Series bool
	// Record keeps every decision (starts and preemptions), in order.
	Record bool
	// Timing measures each cycle's wall time (sched_cycle_p99_ms).
	Timing bool
	// FullQueue hands the core the whole queue at every cycle instead of
	// windows of it (see window.go): slower, and the same decisions.
	FullQueue bool
	// MIG gives GPUs of every node (by index) a MIG layout (the simulator
	// sets its slices' Free, Holder, Index); Shared makes the first Shared
	// GPUs of every node not in MIG mode shareable (MPS). See mig.go.
	MIG    map[int][]sched.Slice
	Shared int

	window int // the first window; 0: firstWindow (tests try small ones)
	// everyEvent runs a cycle at every event that finds jobs queued, as if
	// none could be shown to decide nothing (tests compare the two).
	everyEvent bool
}

// DefaultPreemptGrace is the server's default preempt_grace.
const DefaultPreemptGrace = 30 * time.Second

// Decision is one decision of the core, as the simulator applied it.
type Decision struct {
	At         time.Time
	JobID      string // the trace's job id
	Kind       string // "start" or "preempt"
	Placements []sched.Placement
}

// JobOutcome is what happened to one job.
type JobOutcome struct {
	ID          string
	Team        string
	Submit      time.Time
	Duration    time.Duration
	GPUs        int
	Completed   bool
	FirstStart  time.Time
	End         time.Time
	Queued      time.Duration // time spent queued, all attempts together
	Preemptions int
}

// Point is the cluster's state from At until the next point.
type Point struct {
	At        time.Time
	Queued    int // jobs waiting
	Allocated int // GPUs held by jobs
}

// Outcome is a simulation's result.
type Outcome struct {
	Metrics   Metrics
	Jobs      []JobOutcome // in trace order
	Decisions []Decision   // with Config.Record
	Series    []Point      // with Config.Series
	// Unsatisfiable counts jobs that no placement on this cluster could
	// ever run (more GPUs than the cluster has); they are never queued.
	Unsatisfiable int
	Cycles        []time.Duration // each cycle's wall time, with Config.Timing
	GPUs          int             // GPUs in the cluster
}

// job states in the simulation
const (
	stPending = iota // not submitted yet
	stQueued
	stRunning
	stDone
	stUnsat
)

type simJob struct {
	t           *Job
	id          string // the core's id: the trace position, zero-padded so ids sort in submission order
	gpus, nodes int    // per node, and nodes of the gang
	given       time.Duration
	state       int
	attempt     int
	queuedAt    time.Time
	queued      time.Duration
	attained    time.Duration // GPU time of its ended attempts (sched.Job.Attained)
	firstStart  time.Time
	startedAt   time.Time
	end         time.Time
	preempting  bool
	preemptions int
	// estimated: the job was told an estimate (at its first queueing),
	// firstEstimate (0: none, the policy default) for Metrics' accuracy.
	estimated     bool
	firstEstimate time.Duration
	ri            int // position in sim.running
	user          int // position in sim.users
	project       int // position in sim.projects
}

// sim is one run's live state. The books mirror the orchestrator's: a
// queue and a running list in the core's types, GPUs marked free or not,
// a usage ledger charged when attempts end, and an estimator fed by
// completed jobs.
type sim struct {
	cfg    Config
	policy sched.Policy
	jobs   []simJob
	nodes  []sched.Node
	nodeAt map[string]int
	nfree  []int

	// The queue, in lanes: each lane holds queued jobs in the core's own
	// order (see window.go). qjob is each job as the core sees it.
	lanes   []*lane
	laneOf  map[[2]string]int
	qjob    []sched.Job
	queued  int
	queue   []sched.Job // the snapshot's queue, rebuilt every cycle
	running []sched.Running
	needs   []int // queued jobs by GPUs per node (the last slot: more than a node has)
	// What couldPreempt needs (see skip.go).
	users    []*userBook
	projects []*projectBook
	skip     skipScratch
	// windowed: cycles may see only the head of each lane (see window.go).
	windowed bool
	mark     []bool   // scratch: jobs started this cycle
	pidx     []int32  // scratch: 1 + each waiting job's position in the cycle's Pending
	free     []int    // scratch: free GPUs per node
	cntFree  []int    // scratch: nodes with at least g free GPUs, by g
	cntOpen  []int    // scratch: the same outside the reservation
	bounds   [][2]int // scratch: judgeLanes' bounds by Pending position

	minPrio int // the lowest priority of any job (see starveCut)
	// shapes: queued jobs by GPUs per node and nodes, each in the core's
	// order, for the head (see oldestHead)
	shapes map[[2]int]*lane

	ledger    *sched.Ledger
	estimator *sched.Estimator
	predictor *sched.Predictor        // EstimatesLearned
	learned   bool                    // the estimator changed since estimates were last refreshed
	relearn   bool                    // this cycle, queued jobs' learned estimates are made anew (queueJob)
	relearned map[learnKey]learnedEst // relearn's estimates by kind of job, for one cycle

	events  eventHeap
	seq     int
	next    int // next arrival, in trace order
	order   []int
	now     time.Time
	out     *Outcome
	acc     accumulator
	cycles  int
	stopped int // preemptions carried out

	migGPUs, migBusy int // GPUs in MIG mode, and those with a slice held (mig.go)
	tail             tailBook
}

// Run replays jobs (in any order; they are taken by submission time)
// through the scheduling core on the configured cluster, in virtual time,
// and returns what happened. It does not modify jobs.
func Run(jobs []Job, cfg Config) (*Outcome, error) {
	if cfg.Nodes <= 0 || cfg.NodeGPUs <= 0 {
		return nil, errors.New("sim: the cluster needs at least one node with at least one GPU")
	}
	if cfg.Nodes*cfg.NodeGPUs > 1<<20 {
		return nil, errors.New("sim: at most 1,048,576 GPUs")
	}
	switch cfg.Estimates {
	case "":
		cfg.Estimates = EstimatesExact
	case EstimatesExact, EstimatesNoisy, EstimatesAbsent, EstimatesLearned:
	default:
		return nil, fmt.Errorf("sim: estimates %q: want %s, %s, %s or %s", cfg.Estimates, EstimatesExact, EstimatesNoisy, EstimatesLearned, EstimatesAbsent)
	}
	if cfg.NoiseSigma <= 0 {
		cfg.NoiseSigma = 0.5
	}
	if cfg.PreemptGrace == 0 {
		cfg.PreemptGrace = DefaultPreemptGrace
	} else if cfg.PreemptGrace < 0 {
		cfg.PreemptGrace = 0
	}
	if cfg.GPUModel == "" {
		cfg.GPUModel = "SIM"
	}
	if cfg.GPUMemoryMiB <= 0 {
		cfg.GPUMemoryMiB = 80 * 1024
	}
	if !sched.ValidPolicy(cfg.Policy.WithDefaults().Name) {
		return nil, fmt.Errorf("sim: policy %q: want one of %v", cfg.Policy.Name, sched.Policies())
	}
	s := newSim(jobs, cfg)
	s.run()
	s.finish()
	return s.out, nil
}

func newSim(jobs []Job, cfg Config) *sim {
	s := &sim{cfg: cfg, policy: cfg.Policy.WithDefaults(), nodeAt: map[string]int{},
		needs: make([]int, cfg.NodeGPUs+2), out: &Outcome{GPUs: cfg.Nodes * cfg.NodeGPUs}}
	s.laneOf = map[[2]string]int{}
	s.shapes = map[[2]int]*lane{}
	s.windowed = !cfg.FullQueue && len(cfg.MIG) == 0 && cfg.Shared == 0 && !s.policy.PreemptIdle && len(s.policy.UserQuotas) == 0 &&
		len(s.policy.ProjectQuotas) == 0 && !(s.policy.Name == sched.PolicySJF && (cfg.Estimates == EstimatesAbsent || cfg.Estimates == EstimatesLearned))
	s.ledger = sched.NewLedger(s.policy.HalfLife)
	s.estimator = sched.NewEstimator()
	s.predictor = sched.NewPredictor(0, 0)
	for n := range cfg.Nodes {
		node := sched.Node{ID: NodeID(n), Schedulable: true, GPUs: make([]sched.GPU, cfg.NodeGPUs)}
		for g := range node.GPUs {
			node.GPUs[g] = sched.GPU{Index: g, Model: cfg.GPUModel, MemoryMiB: cfg.GPUMemoryMiB, Free: true}
		}
		mig := s.initMIG(&node) // mig.go
		s.migGPUs += mig
		s.nodeAt[node.ID] = n
		s.nodes = append(s.nodes, node)
		s.nfree = append(s.nfree, cfg.NodeGPUs-mig)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636f7272616c)) // "corral"
	width := len(strconv.Itoa(len(jobs)))
	s.jobs = make([]simJob, len(jobs))
	s.qjob = make([]sched.Job, len(jobs))
	s.mark = make([]bool, len(jobs))
	s.pidx = make([]int32, len(jobs))
	userAt, projectAt := map[string]int{}, map[string]int{}
	s.minPrio = math.MaxInt
	for i := range jobs {
		t := &jobs[i]
		sj := &s.jobs[i]
		sj.t, sj.ri = t, -1
		sj.user = slotOf(userAt, &s.users, t.User, func() *userBook { return &userBook{name: t.User} })
		sj.project = slotOf(projectAt, &s.projects, t.Project, func() *projectBook { return &projectBook{name: t.Project} })
		sj.id = fmt.Sprintf("%0*d", width, i)
		sj.gpus, sj.nodes = Gang(t.GPUs, cfg.NodeGPUs)
		mig, shareMiB, shareCompute := s.partAsked(t) // mig.go
		if mig != "" || shareMiB > 0 {
			sj.gpus, sj.nodes = 1, 1
		}
		switch {
		case cfg.Estimates == EstimatesAbsent || cfg.Estimates == EstimatesLearned:
		case t.Estimate > 0:
			sj.given = t.Estimate
		case cfg.Estimates == EstimatesNoisy:
			f := math.Exp(cfg.NoiseSigma * rng.NormFloat64())
			sj.given = max(time.Duration(float64(t.Duration)*f), time.Second)
		default:
			sj.given = max(t.Duration, time.Second)
		}
		if sj.nodes > cfg.Nodes {
			sj.state = stUnsat
		}
		prio := t.Priority
		if prio == 0 {
			prio = 2
		}
		s.minPrio = min(s.minPrio, prio)
		s.qjob[i] = sched.Job{ID: sj.id, User: t.User, Project: t.Project, Priority: prio,
			SubmittedAt: t.Submit, GPUs: sj.gpus, Nodes: sj.nodes, MIGProfile: mig, ShareMiB: shareMiB, ShareCompute: shareCompute}
	}
	// Arrivals in submission order, ties in trace order.
	s.order = make([]int, len(jobs))
	for i := range s.order {
		s.order[i] = i
	}
	slices.SortStableFunc(s.order, func(a, b int) int { return jobs[a].Submit.Compare(jobs[b].Submit) })
	return s
}

// run is the event loop: at each event time, apply every arrival and end
// due then, then run one scheduling cycle if one could decide anything.
func (s *sim) run() {
	for {
		var at int64
		switch {
		case s.next < len(s.order) && (len(s.events) == 0 || s.jobs[s.order[s.next]].t.Submit.UnixNano() <= s.events[0].at):
			at = s.jobs[s.order[s.next]].t.Submit.UnixNano()
		case len(s.events) > 0:
			at = s.events[0].at
		default:
			return
		}
		now := time.Unix(0, at).UTC()
		if s.now.IsZero() {
			s.acc.start(now)
		}
		s.acc.advance(now, s.allocated(), s.queued)
		s.now = now
		wake := false
		for s.next < len(s.order) && s.jobs[s.order[s.next]].t.Submit.UnixNano() == at {
			s.arrive(s.order[s.next])
			s.next++
			wake = true
		}
		for len(s.events) > 0 && s.events[0].at == at {
			e := heap.Pop(&s.events).(event)
			wake = s.handle(e) || wake
		}
		if s.cfg.Estimates == EstimatesLearned {
			s.outlived() // at every event, so that skipped cycles change nothing
		}
		if wake && s.couldDecide() {
			s.cycle()
		}
		if s.cfg.Series {
			s.out.Series = append(s.out.Series, Point{At: now, Queued: s.queued, Allocated: s.allocated()})
		}
	}
}

// arrive queues a submitted job.
func (s *sim) arrive(i int) {
	j := &s.jobs[i]
	if j.state == stUnsat {
		return
	}
	s.enqueue(i)
}

func (s *sim) enqueue(i int) {
	j := &s.jobs[i]
	j.state, j.queuedAt = stQueued, s.now
	q := &s.qjob[i]
	q.Estimate, q.EstimateGiven = sched.EstimateFor(j.given, j.t.User, s.estimator, s.policy.DefaultEstimate)
	q.NoEstimate, q.Attained = s.noEstimate(i), j.attained
	point := q.Estimate
	if s.cfg.Estimates == EstimatesLearned {
		q.Estimate, point, q.EstimateGiven = s.learnedEstimate(i, 0)
		q.NoEstimate = !q.EstimateGiven
	}
	if !j.estimated {
		j.estimated = true
		j.firstEstimate = point
		if !q.EstimateGiven {
			j.firstEstimate = 0
		}
	}
	s.laneFor(i).insert(s, i)
	s.shapeFor(i).insert(s, i)
	s.tailAdd(i)
	s.queued++
	s.needs[min(j.gpus, len(s.needs)-1)]++
}

func (s *sim) dequeue(i int) {
	j := &s.jobs[i]
	s.laneFor(i).remove(s, i)
	s.shapeFor(i).remove(s, i)
	s.tailRemove(i)
	s.queued--
	j.queued += s.now.Sub(j.queuedAt)
	s.needs[min(j.gpus, len(s.needs)-1)]--
}

// index is the trace position of a core job id.
func (s *sim) index(id string) int {
	i, _ := strconv.Atoi(id)
	return i
}

// handle applies one event; it reports whether a cycle is due.
func (s *sim) handle(e event) bool {
	j := &s.jobs[e.job]
	if j.state != stRunning || j.attempt != e.attempt {
		return false // stale: the attempt already ended
	}
	switch e.kind {
	case evProtected:
		return s.queued > 0
	case evEnd:
		s.release(e.job)
		if j.preempting && s.now.Sub(j.startedAt) < j.t.Duration {
			// Requeued with its retry count raised, as the server does; it
			// starts over (no checkpoint).
			j.preempting = false
			j.attempt++
			j.preemptions++
			s.enqueue(e.job)
			return true
		}
		j.state, j.end, j.preempting = stDone, s.now, false
		s.estimator.Observe(j.t.User, s.now.Sub(j.startedAt))
		s.predictor.Observe(sched.Attempt{User: j.t.User, Project: j.t.Project, Name: j.t.Name, Command: j.t.Command,
			GPUs: j.t.GPUs, Ran: s.now.Sub(j.startedAt)})
		s.learned = true
		return true
	}
	return false
}

// release frees an attempt's GPUs and charges its GPU time to fair share.
func (s *sim) release(i int) {
	j := &s.jobs[i]
	r := &s.running[j.ri]
	gs := sched.Equivalents(r.Placements) // a slice counts its part of its GPU
	for _, p := range r.Placements {
		n := s.nodeAt[p.NodeID]
		if s.holdPart(n, p, false, j.id, j.t.User) { // mig.go
			continue
		}
		for _, g := range p.GPUs {
			s.nodes[n].GPUs[g].Free = true
		}
		s.nfree[n] += len(p.GPUs)
	}
	if s.now.After(j.startedAt) {
		j.attained += time.Duration(gs * float64(s.now.Sub(j.startedAt)))
		s.ledger.Add(j.t.User, j.t.Project, gs*s.now.Sub(j.startedAt).Seconds(), s.now)
	}
	last := len(s.running) - 1
	if j.ri != last {
		s.running[j.ri] = s.running[last]
		s.jobs[s.index(s.running[j.ri].ID)].ri = j.ri
	}
	s.running = s.running[:last]
	j.ri = -1
}

// cycle builds the snapshot as the orchestrator does, runs the core, and
// applies its decisions. With windowing, the core first sees only the head
// of each lane; when the result does not prove that the rest of the queue
// could not have changed it, the cycle is run again with the left-out jobs
// that might have, or on a larger window, up to the whole queue (see
// window.go).
func (s *sim) cycle() {
	if s.learned && s.cfg.Estimates == EstimatesAbsent {
		s.refreshEstimates()
	}
	// Under sjf (never windowed with learned estimates) queued jobs'
	// learned estimates are made anew once the predictor learned, as the
	// server's are at every snapshot. Other policies keep the estimates
	// jobs were queued with: their windows' lanes and tail index are
	// built on them.
	s.relearn = s.learned && s.cfg.Estimates == EstimatesLearned && s.policy.Name == sched.PolicySJF
	if s.relearn {
		s.learned = false
		clear(s.relearned)
	}

	var usage sched.Usage // only fair_share reads it
	if s.policy.Name == sched.PolicyFairShare {
		usage = s.ledger.Usage(s.now)
		sched.ChargeRunning(usage, s.running, s.now)
	}
	var began time.Time
	if s.cfg.Timing {
		began = time.Now()
	}
	var res sched.Result
	w := firstWindow
	if s.cfg.window > 0 {
		w = s.cfg.window
	}
	if !s.windowed {
		w = math.MaxInt
	}
	for widenings := 0; ; {
		whole := s.buildQueue(w)
		snap := sched.Snapshot{Now: s.now, Nodes: s.nodes, Queue: s.queue, Running: s.running, Usage: usage, Policy: s.policy,
			LeftOutWork: s.leftOutWork()}
		res = sched.Schedule(snap)
		if whole {
			break
		}
		v := s.judge(res, w, widenings)
		if v == accept {
			break
		}
		if v == widen {
			widenings++ // the same window, and the left-out jobs judge added
			continue
		}
		s.clearExtra()
		w, widenings = w*4, 0
	}
	s.clearExtra()
	if s.cfg.Timing {
		s.out.Cycles = append(s.out.Cycles, time.Since(began))
	}
	s.cycles++
	for _, st := range res.Starts {
		s.start(st)
	}
	for _, p := range res.Preemptions {
		s.preempt(p)
	}
}

// refreshEstimates recomputes the running jobs' learned estimates after
// the estimator learned, as the orchestrator does at every snapshot
// (queued jobs get theirs in buildQueue).
func (s *sim) refreshEstimates() {
	s.learned = false
	for k := range s.running {
		r := &s.running[k]
		j := &s.jobs[s.index(r.ID)]
		r.Estimate, _ = sched.EstimateFor(j.given, j.t.User, s.estimator, s.policy.DefaultEstimate)
	}
}

func (s *sim) start(st sched.Start) {
	i := s.index(st.JobID)
	j := &s.jobs[i]
	q := s.qjob[i]
	s.dequeue(i)
	for _, p := range st.Placements {
		n := s.nodeAt[p.NodeID]
		if s.holdPart(n, p, true, j.id, j.t.User) { // mig.go
			continue
		}
		for _, g := range p.GPUs {
			s.nodes[n].GPUs[g].Free = false
		}
		s.nfree[n] -= len(p.GPUs)
	}
	j.state, j.startedAt = stRunning, s.now
	if j.firstStart.IsZero() {
		j.firstStart = s.now
	}
	j.ri = len(s.running)
	s.running = append(s.running, sched.Running{ID: j.id, User: j.t.User, Project: j.t.Project, Priority: q.Priority,
		Placements: st.Placements, StartedAt: s.now, SubmittedAt: q.SubmittedAt, Estimate: q.Estimate, Borrowed: st.Borrowed})
	s.push(s.now.Add(j.t.Duration), evEnd, i, j.attempt)
	if s.policy.Preemption && s.policy.MinRunTime > 0 {
		s.push(s.now.Add(s.policy.MinRunTime), evProtected, i, j.attempt)
	}
	if s.cfg.Record {
		s.out.Decisions = append(s.out.Decisions, Decision{At: s.now, JobID: j.t.ID, Kind: "start", Placements: st.Placements})
	}
}

func (s *sim) preempt(p sched.Preemption) {
	i := s.index(p.JobID)
	j := &s.jobs[i]
	if j.state != stRunning || j.preempting {
		return
	}
	j.preempting = true
	s.running[j.ri].Preempting = true
	s.stopped++
	end := s.now.Add(s.cfg.PreemptGrace)
	if fin := j.startedAt.Add(j.t.Duration); fin.Before(end) {
		end = fin // it completes within its grace: the end already queued stands
	} else {
		s.push(end, evEnd, i, j.attempt)
	}
	if s.cfg.Record {
		s.out.Decisions = append(s.out.Decisions, Decision{At: s.now, JobID: j.t.ID, Kind: "preempt", Placements: s.running[j.ri].Placements})
	}
}

// slotOf returns name's position in list, appending mk() the first time
// name is seen; at maps names to positions.
func slotOf[T any](at map[string]int, list *[]T, name string, mk func() T) int {
	k, ok := at[name]
	if !ok {
		k = len(*list)
		at[name] = k
		*list = append(*list, mk())
	}
	return k
}
