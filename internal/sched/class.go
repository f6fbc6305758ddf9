package sched

// Job classes, as the core sees them: the same names as the
// API's. The empty class is ClassBatch.
const (
	ClassBatch                  = "batch"                   // preemptible by policy; may borrow idle GPUs
	ClassInteractive            = "interactive"             // never a victim; within its quotas, never borrows
	ClassInteractivePreemptible = "interactive-preemptible" // may borrow idle GPUs; preemptible
	ClassPreemptible            = "preemptible"             // batch that may also run into bookings ahead
)

// Protected reports whether a job of class may never be preempted: not
// for priority, fair share, quota reclaim nor idleness of batch kind.
func Protected(class string) bool { return class == ClassInteractive }

// mayBorrow reports whether a job of class may start over its quota on
// idle GPUs.
func mayBorrow(class string) bool { return class != ClassInteractive }
