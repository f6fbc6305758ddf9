package sched

import "time"

// The policies, by their SPEC names.
const (
	PolicyFairShare = "fair_share" // the default
	PolicyPriority  = "priority"
	PolicyFCFS      = "fcfs"
	PolicySJF       = "sjf"
)

// Policies lists the policy names the core accepts, the default first.
func Policies() []string {
	return []string{PolicyFairShare, PolicyPriority, PolicyFCFS, PolicySJF}
}

// ValidPolicy reports whether name is a policy the core implements.
func ValidPolicy(name string) bool {
	for _, p := range Policies() {
		if p == name {
			return true
		}
	}
	return false
}

// Defaults of the policy's knobs.
const (
	DefaultAgingInterval = 2 * time.Hour
	DefaultHalfLife      = 7 * 24 * time.Hour
	DefaultEstimate      = time.Hour
	DefaultMinRunTime    = 10 * time.Minute
)

// Policy is the active policy and its knobs. Zero knobs take the defaults.
type Policy struct {
	Name       string
	Backfill   bool
	Preemption bool
	Spread     bool // place on the emptiest nodes instead of the fullest that fit
	// PlainBestFit places single-node jobs on the fullest node that fits,
	// without scoring by when the nodes' jobs end (see find).
	PlainBestFit bool

	// AgingInterval: a waiting job gains one priority level per interval
	// (priority and fair_share). A job is never overtaken by a job submitted
	// more than (its priority gap) x AgingInterval after it.
	AgingInterval time.Duration
	// HalfLife of past usage, for fair_share (applied by Ledger).
	HalfLife time.Duration
	// DefaultEstimate is the run time assumed for a job with no estimate
	// and no history.
	DefaultEstimate time.Duration
	// StarveAfter: under fair_share, a job that has waited this long since
	// it was submitted is served before every job that has not, oldest
	// first (see Starving). Zero: DefaultStarveAfter; negative: never.
	StarveAfter time.Duration
	// StarveShare is the most of the cluster's GPUs that jobs which went
	// first for starving may hold (see budgetOf). Zero:
	// DefaultStarveShare; 1 or more: all.
	StarveShare float64
	// StarveBacklog: a job starves only once it has also waited this many
	// times the backlog (the time the cluster needs to drain its queued
	// and running work, see Backlog), so that the threshold grows with
	// the load instead of staying at StarveAfter: at a load the cluster
	// does not keep up with, every job would otherwise end up starving.
	// Zero: DefaultStarveBacklog; negative: StarveAfter alone.
	StarveBacklog float64
	// StarveLightShare: at light load, while the queued work would drain
	// within StarveLightDrain (see DrainTime), a job that has waited
	// StarveAfter but not yet StarveBacklog backlogs starves too, after
	// those that have, as long as the jobs that went first for starving
	// hold less than this share of the GPUs: there the backlog is mostly
	// the time left of long running jobs, days, and a job passed over
	// would wait it out (see starve.go). Zero: DefaultStarveLightShare;
	// negative: never.
	StarveLightShare float64
	// StarveLightDrain: the longest drain time of the queued work
	// (DrainTime) at which StarveLightShare applies. Zero:
	// DefaultStarveLightDrain; negative: never.
	StarveLightDrain time.Duration
	// StarveLightFloor: while light starving applies, a job starves light
	// once it has waited StarveAfter for every StarveLightScale (a week)
	// the queue takes to drain (DrainTime), less as the queue gets
	// shorter, but never less than this:
	// at light load the queue drains in hours, and a gang that fair share
	// passes over would otherwise wait StarveAfter. Zero:
	// DefaultStarveLightFloor; negative: StarveAfter alone.
	StarveLightFloor time.Duration
	// OldestFirst: under fair_share the oldest starving job goes first
	// whatever the starving budget (StarveShare) holds, so that a starving
	// big job becomes the head (see starve.go). Off by default: it bounds
	// the longest wait but costs average JCT and replay time (measured in
	// docs/scheduling.md).
	OldestFirst bool
	// OldestBacklog: under OldestFirst, the oldest starving job goes first
	// past StarveShare only once it has waited this many times the backlog
	// (the time the cluster needs to drain its queued and running work,
	// see Backlog): at a load the cluster keeps up with, a job that waited
	// many backlogs was passed over; at a load it does not, every old job
	// has waited about a backlog, and serving the oldest first would be
	// first-come first-served. Zero: no such bound.
	OldestBacklog float64
	// OldestStretch: likewise, only once it has waited this many times its
	// own estimate. Zero: no such bound.
	OldestStretch float64
	// OldestHead: under fair_share with backfill, the head (the job
	// holding the reservation) is the oldest job that cannot start, not
	// the first of the walk that does not fit (see OldestHead).
	OldestHead bool
	// ReserveAfter: under fair_share with backfill, a job becomes the
	// head, and GPUs are held for it, only once it has waited this long
	// (see mayReserve). Zero: DefaultReserveAfter; negative: at once.
	ReserveAfter time.Duration
	// TailFactor: under fair_share, a job with a given estimate at least
	// TailFactor times the backlog (the estimated work queued and running,
	// over every GPU) is on the tail and served first, the longest first
	// (see tail.go). Zero: DefaultTailFactor; negative: never.
	TailFactor float64
	// TailWait: a job goes first on the tail only once it has waited this
	// share of its estimate (it is then ending later than it could for
	// waiting). Zero: DefaultTailWait; negative: at once.
	TailWait float64
	// MinRunTime protects a job from preemption for this long after it
	// starts, so two jobs never thrash.
	MinRunTime time.Duration

	// Weights of users and projects in fair_share; missing means 1.
	UserWeights    map[string]float64
	ProjectWeights map[string]float64
	// Quotas: GPUs guaranteed to a user or project. Beyond its quota a job
	// only borrows GPUs nobody within quota is waiting for, and borrowed
	// GPUs are the first taken back. Missing means no quota (no guarantee,
	// no limit).
	UserQuotas    map[string]int
	ProjectQuotas map[string]int
	// PreemptIdle lets any waiting job preempt jobs flagged idle (their GPUs
	// sat under the idle threshold for the idle window), preemption switch
	// or not.
	PreemptIdle bool
}

// WithDefaults fills zero knobs with their defaults.
func (p Policy) WithDefaults() Policy {
	if p.Name == "" {
		p.Name = PolicyFairShare
	}
	if p.AgingInterval <= 0 {
		p.AgingInterval = DefaultAgingInterval
	}
	if p.HalfLife <= 0 {
		p.HalfLife = DefaultHalfLife
	}
	if p.DefaultEstimate <= 0 {
		p.DefaultEstimate = DefaultEstimate
	}
	if p.MinRunTime < 0 {
		p.MinRunTime = 0
	}
	return p
}

func weight(m map[string]float64, k string) float64 {
	if w, ok := m[k]; ok && w > 0 {
		return w
	}
	return 1
}
