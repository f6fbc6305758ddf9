package api

// Policies is GET /orchestrator/policies: the active policy, its switches
// and knobs, weights and quotas. Durations are in seconds.
type Policies struct {
	Policy     string `json:"policy"`     // fair_share, priority, fcfs or sjf
	Backfill   bool   `json:"backfill"`   // EASY backfill around the head job's reservation
	Preemption bool   `json:"preemption"` // higher-ranked jobs may preempt lower ones
	Gang       bool   `json:"gang"`       // always on: multi-GPU jobs are placed all-or-nothing
	Spread     bool   `json:"spread"`     // place on the emptiest nodes instead of best fit

	AgingInterval   Seconds `json:"aging_interval"`   // one priority level gained per interval waited
	HalfLife        Seconds `json:"half_life"`        // of past usage, for fair_share
	DefaultEstimate Seconds `json:"default_estimate"` // run time assumed without estimate or history
	MinRunTime      Seconds `json:"min_run_time"`     // protection from preemption after a start
	PreemptGrace    Seconds `json:"preempt_grace"`    // SIGTERM to SIGKILL for a preempted job without its own
	IdleThreshold   int     `json:"idle_threshold"`   // percent GPU utilization under which a job's GPUs are idle
	IdleWindow      Seconds `json:"idle_window"`      // idle this long, a job is flagged idle
	IdleAction      string  `json:"idle_action"`      // notify (flag it), or preempt (flagged jobs may be preempted for waiting work)

	// fair_share's starving, reservation and tail knobs (docs/scheduling.md).
	StarveAfter Seconds `json:"starve_after"` // a job waiting this long goes before every job that has not, oldest first; 0: never
	StarveShare float64 `json:"starve_share"` // the most of the GPUs that jobs which went first for starving may hold (above 0, at most 1)
	// StarveBacklog: a job is starving only once it has also waited this
	// many times the backlog (queued and running work over every GPU); 0: starve_after alone.
	StarveBacklog float64 `json:"starve_backlog"`
	// StarveLightShare: while the queued work drains within
	// starve_light_drain (light load), a job that waited starve_after
	// alone goes first too, while the jobs that went first for starving
	// hold less than this share of the GPUs; 0: never.
	StarveLightShare float64 `json:"starve_light_share"`
	// StarveLightDrain: the longest drain time of the queued work at which
	// starve_light_share applies; 0: never.
	StarveLightDrain Seconds `json:"starve_light_drain"`
	// StarveLightFloor: under starve_light_share, a job starves light once
	// it has waited starve_after for every week the queue takes to
	// drain, never less than this (nor more than
	// starve_after); 0: starve_after alone.
	StarveLightFloor Seconds `json:"starve_light_floor"`
	OldestFirst      bool    `json:"oldest_first"`  // the oldest starving job goes first whatever starve_share holds
	ReserveAfter     Seconds `json:"reserve_after"` // with backfill, a job holds a reservation only once it has waited this long; 0: at once
	TailFactor       float64 `json:"tail_factor"`   // a job whose estimate is at least this many times the backlog goes first, the longest first; 0: never
	TailWait         float64 `json:"tail_wait"`     // a job goes first on the tail only once it has waited this share of its estimate; 0: at once

	Weights Weights `json:"weights"` // fair-share weights; missing means 1
	Quotas  Quotas  `json:"quotas"`  // guaranteed GPUs; missing means none

	// Classes: idle reclaim of interactive work, per class (interactive.go).
	Classes map[string]ClassIdle `json:"classes,omitempty"`

	Available []string `json:"available,omitempty"` // the policies this server offers (read-only)
}

// Weights are fair-share weights by user and by project.
type Weights struct {
	Users    map[string]float64 `json:"users"`
	Projects map[string]float64 `json:"projects"`
}

// Quotas are guaranteed GPUs by user and by project. Beyond its quota a job
// may borrow idle GPUs, which are the first taken back.
type Quotas struct {
	Users    map[string]int `json:"users"`
	Projects map[string]int `json:"projects"`
}

// PoliciesUpdate is the body of PUT /orchestrator/policies. Omitted fields
// keep their value. Weights and quotas are merged by name; a null value
// removes that user's or project's entry.
type PoliciesUpdate struct {
	Policy           *string        `json:"policy,omitempty"`
	Backfill         *bool          `json:"backfill,omitempty"`
	Preemption       *bool          `json:"preemption,omitempty"`
	Gang             *bool          `json:"gang,omitempty"`
	Spread           *bool          `json:"spread,omitempty"`
	AgingInterval    RawValue       `json:"aging_interval,omitempty"`
	HalfLife         RawValue       `json:"half_life,omitempty"`
	DefaultEstimate  RawValue       `json:"default_estimate,omitempty"`
	MinRunTime       RawValue       `json:"min_run_time,omitempty"`
	PreemptGrace     RawValue       `json:"preempt_grace,omitempty"`
	IdleThreshold    *int           `json:"idle_threshold,omitempty"`
	IdleWindow       RawValue       `json:"idle_window,omitempty"`
	IdleAction       *string        `json:"idle_action,omitempty"`
	StarveAfter      RawValue       `json:"starve_after,omitempty"`
	StarveShare      *float64       `json:"starve_share,omitempty"`
	StarveBacklog    *float64       `json:"starve_backlog,omitempty"`
	StarveLightShare *float64       `json:"starve_light_share,omitempty"`
	StarveLightDrain RawValue       `json:"starve_light_drain,omitempty"`
	StarveLightFloor RawValue       `json:"starve_light_floor,omitempty"`
	OldestFirst      *bool          `json:"oldest_first,omitempty"`
	ReserveAfter     RawValue       `json:"reserve_after,omitempty"`
	TailFactor       *float64       `json:"tail_factor,omitempty"`
	TailWait         *float64       `json:"tail_wait,omitempty"`
	Weights          *WeightsUpdate `json:"weights,omitempty"`
	Quotas           *QuotasUpdate  `json:"quotas,omitempty"`
	// Classes changes idle reclaim settings by class (interactive.go).
	Classes map[string]ClassIdleUpdate `json:"classes,omitempty"`
}

// WeightsUpdate changes fair-share weights; null removes an entry.
type WeightsUpdate struct {
	Users    map[string]*float64 `json:"users,omitempty"`
	Projects map[string]*float64 `json:"projects,omitempty"`
}

// QuotasUpdate changes quotas; null removes an entry.
type QuotasUpdate struct {
	Users    map[string]*int `json:"users,omitempty"`
	Projects map[string]*int `json:"projects,omitempty"`
}
