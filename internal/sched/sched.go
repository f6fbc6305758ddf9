// Package sched is Corral's scheduling core: a pure function from a snapshot
// of the cluster, the queue, past usage and the policy to decisions. It does
// no I/O, starts no goroutines and never reads the clock (the snapshot
// carries the time), so the live orchestrator and the trace simulator run
// exactly the same code.
//
// A cycle (Schedule) walks the queue in the policy's order:
//
//  1. order: fcfs, priority with aging, sjf, or fair_share (users and
//     projects by decayed GPU-hours against their weight, re-ranked as the
//     cycle hands out GPUs; under fair_share, jobs that have waited
//     StarveAfter come first while those that went first hold under
//     StarveShare of the GPUs, see starve.go);
//  2. quota: a job that would take its user or project past a guaranteed
//     quota is deferred; it may later borrow GPUs left idle;
//  3. place: all-or-nothing on enough nodes that pass the filters (GPU type,
//     memory, schedulable), scored by NVLink fit, best fit (or spread),
//     then by when the nodes' running jobs end;
//  4. when a job does not fit: take back borrowed GPUs, or, with
//     preemption on, GPUs of lower-ranked jobs (least work lost first); else
//     the first such job holds a reservation (backfill on: later jobs start
//     only where they cannot delay it; off: nothing starts past it; under
//     fair_share only a job that has waited ReserveAfter holds one);
//  5. every job left waiting gets a reason, and the facts of a sentence
//     (Pending.Message builds it when asked).
package sched

import "time"

// GPU is one device of a node as the core sees it.
type GPU struct {
	Index     int
	Model     string
	MemoryMiB int64
	Free      bool // neither allocated to a job nor held
	// Foreign: a process Corral did not start runs on the GPU (Free is
	// false); told in why a job waits.
	Foreign bool
	// Domain numbers the GPU's NVLink domain on its node: GPUs with the same
	// Domain reach each other over NVLink (see Domains). 0 for all: one domain.
	Domain int
	// MIG, when not nil, puts the GPU in MIG mode: its slices are the
	// units placed (gpushare.go); the GPU itself is never Free.
	// MIGSlices is the GPU's compute slices in all (7 on an H100; 0:
	// unknown, the sum of its slices' is used).
	MIG       []Slice
	MIGSlices int
	// Share, when not nil, makes the GPU take MPS shares (gpushare.go).
	// It is Free only while no share runs on it.
	Share *Share
}

// Node is one node as the core sees it.
type Node struct {
	ID          string
	Schedulable bool // false: nothing new starts here (cordoned, draining, down)
	GPUs        []GPU
	Labels      map[string]string

	// DiskFull, when set, says why the node's log disk is too full to
	// take new jobs (its agent's --min-free-disk); Schedulable is then
	// false.
	DiskFull string
}

// Job is one queued job as the core sees it.
type Job struct {
	ID           string
	User         string
	Project      string
	Priority     int       // 1 (low) .. 4 (critical)
	SubmittedAt  time.Time // queue order; aging counts from here
	GPUs         int       // GPUs per node
	Nodes        int       // nodes of the gang; 0 means 1
	MinMemoryMiB int64     // minimum memory per GPU
	GPUType      string    // case-insensitive substring of the GPU model; empty: any
	// Estimate is the expected run time: the job's estimated_duration, else
	// one learned from its user's past jobs, else the policy default.
	Estimate time.Duration
	// EstimateGiven is true when the user gave estimated_duration: only
	// such jobs are backfilled past a reservation.
	EstimateGiven bool
	// EstimateLow and EstimatePoint, when set, are a learned estimate's
	// low end and point, Estimate being its high end (what backfill plans
	// on): EstimateStartRanges plans with each. Zero: Estimate.
	EstimateLow, EstimatePoint time.Duration
	// NoEstimate: the job has no estimate at all (none given, no history
	// to learn one from): Estimate is the policy default. sjf then orders
	// it by Attained instead (Tiresias's least attained service: a job
	// that has not run yet is taken for a short one).
	NoEstimate bool
	// Attained is the GPU time (GPUs x run time) the job's earlier
	// attempts had, for NoEstimate under sjf.
	Attained time.Duration
	// NotBefore holds a requeued job back until then (backoff after a loss).
	NotBefore time.Time
	// Begin: NotBefore is the job's own begin time (sbatch --begin), not
	// a backoff; it pends with ReasonBeginTime.
	Begin bool
	// NodeLabels: the job runs only on nodes that have all these labels.
	NodeLabels map[string]string
	// GPUsMin, when 0 < GPUsMin < GPUs, makes the job elastic: from
	// ElasticUntil on it may start with as few as GPUsMin GPUs (one node
	// only; see elastic.go). Zero ElasticUntil: at once.
	GPUsMin      int
	ElasticUntil time.Time
	// Count is how many identical jobs this entry stands for (a job
	// array's waiting tasks); 0 or 1: one. See group.go.
	Count int
	// Class is the job's class (class.go); empty: batch.
	Class string
	// Booking names the booking the job runs in (booking.go); empty:
	// none. TimeLimit, when set, is the most it runs (else Estimate is
	// what a booking ahead is weighed against); Grace is its SIGTERM to
	// SIGKILL time when preempted.
	Booking   string
	TimeLimit time.Duration
	Grace     time.Duration
	// Held, when set, makes the job not eligible: it waits with this
	// pending reason and HeldNote as its sentence (a budget's hold:
	// "budget_exhausted").
	Held     string
	HeldNote string
	// MIGProfile asks for one MIG slice instead of a whole GPU (a
	// profile such as "3g.40gb", or MIGAny); ShareMiB for an MPS share of
	// a shared GPU, with ShareCompute percent of its compute (0: none
	// reserved). Either makes GPUs 1 on 1 node (gpushare.go).
	MIGProfile   string
	ShareMiB     int64
	ShareCompute int
}

// Running is one job that holds GPUs.
type Running struct {
	ID         string
	User       string
	Project    string
	Priority   int
	Placements []Placement
	StartedAt  time.Time
	// SubmittedAt is when the job was submitted, as for Job: a job may be
	// preempted only for one it would not come before in the queue once
	// requeued. Zero: unknown, and the priorities alone decide.
	SubmittedAt time.Time
	Estimate    time.Duration // expected run time, as for Job
	// EstimateLow and EstimatePoint are as Job's (zero: Estimate).
	EstimateLow, EstimatePoint time.Duration
	Borrowed                   bool          // it started on GPUs borrowed beyond a quota
	Preempting                 bool          // it has been told to stop; its GPUs are about to be free
	Idle                       bool          // flagged idle: its GPUs sat unused
	Class                      string        // the job's class (class.go): ClassInteractive is never a victim
	Booking                    string        // the booking it runs in (booking.go); empty: none
	Grace                      time.Duration // SIGTERM to SIGKILL when preempted: its notice comes this long before a booking
}

// Usage is decayed GPU-seconds per user and per project, as of the
// snapshot's time (see Ledger).
type Usage struct {
	Users    map[string]float64
	Projects map[string]float64
}

// Snapshot is everything a cycle decides on. The core does not modify it.
type Snapshot struct {
	Now     time.Time
	Nodes   []Node
	Queue   []Job     // queued jobs, in any order
	Running []Running // jobs holding GPUs
	Usage   Usage
	Policy  Policy
	// Bookings are the GPUs booked over intervals (booking.go): those
	// not yet ended, and those that ended with jobs still in them.
	Bookings []Booking
	// CPUJobsPerUser caps the jobs without GPUs one user may have running
	// (cpujobs.go); more wait with ReasonUserCPUJobLimit. 0: no cap.
	CPUJobsPerUser int
	// LeftOutWork is the GPU-seconds of estimated work (WorkOf) of queued
	// jobs the caller left out of Queue (the simulator hands the core the
	// head of its queue): the backlog counts them (tail.go). 0 for a
	// caller that hands the whole queue.
	LeftOutWork int64
}

// Placement is the GPUs a job gets on one node.
type Placement struct {
	NodeID string
	GPUs   []int // GPU indexes
	// Part, when not nil, says the job has a part of its one GPU: a MIG
	// slice or an MPS share (gpushare.go). Nil: the GPUs whole.
	Part *Part
}

// Start is a decision to start a job on the given placements (one per node).
type Start struct {
	JobID      string
	Placements []Placement
	Borrowed   bool // over its user's or project's quota, on idle GPUs
	// Booking is the booking whose window it starts in (its own, or
	// a magnetic one it landed in); empty: none.
	Booking string
}

// Preemption is a decision to stop a running job so that another can start.
type Preemption struct {
	JobID   string // the victim
	ForJob  string // the job that needs its GPUs
	Reason  string // ReasonReclaim or ReasonPreempted
	Message string
}

// Pending says why a job stays queued: Reason, and Message, a sentence
// for people built when asked (see note.go).
type Pending struct {
	JobID          string
	Position       int       // 1-based position among the jobs left queued
	Reason         string    // machine-readable, one of the Reason constants
	EstimatedStart time.Time // zero: unknown (see Plan for every job's estimate)
	note           note      // what Message says
}

// Reasons a job stays queued, and why jobs are preempted.
const (
	ReasonResources     = "insufficient_gpus"   // not enough free GPUs that match it right now
	ReasonBehindHead    = "waiting_for_head"    // backfill off: an earlier job waits, nothing passes it
	ReasonQuota         = "over_quota"          // over its quota, and no idle GPUs to borrow
	ReasonPreempting    = "preempting"          // GPUs are being freed for it
	ReasonUnsatisfiable = "unsatisfiable"       // no node could ever run it as asked
	ReasonNoNodes       = "no_schedulable_node" // every node is cordoned, draining or down
	ReasonReclaim       = "quota_reclaim"       // preemption: borrowed GPUs taken back
	ReasonPreempted     = "preempted"           // preemption: a higher-ranked job needs the GPUs
	ReasonIdle          = "idle"                // preemption: the job's GPUs sat idle
	ReasonBackoff       = "backoff"             // requeued after a loss; waits out its backoff
	ReasonBeginTime     = "begin_time"          // waits for its begin time (submit --begin)
	ReasonNodeDiskFull  = "node_disk_full"      // no node accepts new jobs, and some refuse because their log disk is full
	// ReasonUserCPUJobLimit: a job without GPUs whose user has as many
	// such jobs running as Snapshot.CPUJobsPerUser allows (cpujobs.go).
	ReasonUserCPUJobLimit = "user_cpu_job_limit"
)

// ReasonBackfillReserved: the job would fit now on GPUs held for the head
// job's reservation (backfill) and could delay it. It and ReasonBooking
// (booking.go) were one reason, "reservation", until they were told
// apart; the API's pending_reason still says "reservation" for both
// (api.PendingReasonOf).
const ReasonBackfillReserved = "backfill_reserved"

// Result is the outcome of one cycle.
type Result struct {
	Starts      []Start      // in the order they were decided
	Preemptions []Preemption // jobs to stop
	Pending     []Pending    // every job not started, in queue order
	// Head is the job holding the reservation, if any; ReservedAt is when.
	Head       string
	ReservedAt time.Time
	// Held is the free GPUs kept for the head's reservation when the cycle
	// ended (later jobs could use them only by ending before ReservedAt).
	Held []Placement
	// Expired is the running jobs whose booking's window has ended (and is
	// not flex): they get the time-limit treatment (booking.go).
	Expired []Expiry
}
