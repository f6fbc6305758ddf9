package jobspec

import (
	"fmt"
	"time"
)

// BackoffMax caps the wait before a lost job's next attempt (Lost).
const BackoffMax = 10 * time.Minute

// Lost is what becomes of a job whose attempt's processes are gone (its
// node was lost, or its agent came back without it), why saying how:
// requeued while retries remain (of maxRetries; preemptions, which do not
// count, are taken out of retryCount), to start no sooner than
// notBefore, after a wait of base doubling per retry and capped at
// BackoffMax (a node or agent that failed may fail again); else failed.
// msg is the transition's message either way.
func Lost(why string, retryCount, preemptions, maxRetries int, base time.Duration, now time.Time) (requeue bool, notBefore time.Time, msg string) {
	if retryCount-preemptions >= maxRetries {
		return false, time.Time{}, fmt.Sprintf("%s; no retries left (max_retries %d)", why, maxRetries)
	}
	retry := retryCount - preemptions + 1
	wait := min(base<<(retry-1), BackoffMax)
	return true, now.Add(wait), fmt.Sprintf("%s; requeued (retry %d of %d) to start no sooner than in %s", why, retry, maxRetries, wait)
}
