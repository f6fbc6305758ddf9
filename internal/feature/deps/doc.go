// Package deps is job dependencies: a job's depends_on, in Slurm's
// --dependency grammar (expr.go), and the rules that say when it is met.
//
// A queued job whose depends_on is not met is left out of the scheduling
// snapshot, so the core never sees it. The verdict is worked out from the
// jobs' current states at every cycle and never remembered as "met": a
// predecessor that goes back to the queue (preempted, node lost) holds
// its dependents that have not started again. A dependency that can no
// longer be met (afterok on a failed job) cancels its job, reason
// dependency_never_satisfied, once the dependency timeout has passed
// since it became so.
//
// An id in an expression names a job, or an array: the ArrayJobID that
// its tasks (jobs ARRAYID_INDEX) share, standing for all of them.
//
// Tracker is the feature. It serves three moments of the orchestrator's
// loop:
//
//	submit:      CheckSubmit parses depends_on and resolves its ids (feature.SubmitCheck)
//	transition:  Moved forgets what it kept of a job that ended (feature.Mover)
//	cycle:       Eligible keeps the jobs it holds out of the snapshot (feature.Eligibility)
//
// What it reads of the orchestrator's books (a job by id, live or ended,
// an array's tasks, the store) comes through Jobs, which the orchestrator
// implements; the package never imports the orchestrator. Its methods are
// called by the loop, with the loop's lock held (the read lock for the
// views: Pending, DependedOn).
package deps
