package sched

import (
	"time"
)

// Elastic jobs (`--gpus 4-8`): a Job with 0 < GPUsMin < GPUs
// takes any count of GPUs from GPUsMin to GPUs on one node. Until its
// ElasticUntil it is placed exactly like a job of GPUs GPUs (it waits for
// its maximum). From then on a cycle gives it the largest count, from GPUs
// down to GPUsMin, that could start now under the same rules as any start:
// on free GPUs (those held for the head's reservation are not free), or
// on reserved GPUs only when it is sure to end before the reservation.
// Quotas cap that count (a job over quota even at its minimum borrows, as
// any job over quota does); when no count fits, the job waits, reserves
// and preempts as a job of GPUsMin GPUs, the least that lets it start.
// What it is granted is the Start's placements; once running it counts
// for fair share, quotas, estimates and preemption by those.

// Shrinkable reports whether the job is elastic and its wait for its
// maximum is over at now: a cycle may then start it with fewer GPUs.
func (j *Job) Shrinkable(now time.Time) bool {
	return j.GPUsMin > 0 && j.GPUsMin < j.GPUs && j.Nodes <= 1 && !now.Before(j.ElasticUntil)
}

// withGPUs returns a copy of j that asks for exactly n GPUs.
func withGPUs(j *Job, n int) *Job {
	c := *j
	c.GPUs, c.GPUsMin = n, 0
	return &c
}

// elasticAsk returns the job as this cycle places it: j itself unless it
// is Shrinkable now; else a copy asking for the largest count that could
// start now (at most its quota room unless borrowing), or for its minimum
// when none could.
func (c *cycle) elasticAsk(j *Job, borrowing bool) *Job {
	if !j.Shrinkable(c.now) {
		return j
	}
	hi := j.GPUs
	if !borrowing {
		hi = min(hi, c.quotaRoom(j))
	}
	for n := hi; n > j.GPUsMin; n-- {
		if k := withGPUs(j, n); c.canStart(k) {
			return k
		}
	}
	return withGPUs(j, j.GPUsMin)
}

// canStart reports whether start would place the job now, without
// placing it: on free GPUs, or on the reservation's held GPUs when the
// job is sure to end before it (the same two ways start tries).
func (c *cycle) canStart(j *Job) bool {
	sh := c.shapeOf(j)
	if sh.noFitAt != c.ix.version+1 {
		if _, ok := c.ix.find(j, c.p.Spread); ok {
			return true
		}
		sh.noFitAt = c.ix.version + 1
	}
	if c.res == nil || c.res.jobID == j.ID || len(c.res.held) == 0 || !c.p.Backfill ||
		!j.EstimateGiven || c.now.Add(j.Estimate).After(c.res.at) {
		return false
	}
	v0 := c.ix.version
	c.ix.give(c.res.held)
	_, ok := c.ix.find(j, c.p.Spread)
	c.ix.take(c.res.held)
	c.ix.version = v0 // the same GPUs are free as before
	return ok
}

// elasticPlan is the job as EstimateStarts plans it: at its minimum once
// it is Shrinkable (the earliest it could start with anything), else as
// asked.
func elasticPlan(j *Job, now time.Time) *Job {
	if j.Shrinkable(now) {
		return withGPUs(j, j.GPUsMin)
	}
	return j
}
