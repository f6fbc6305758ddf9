package sched

// Groups. A Job with Count n > 1 stands for n identical jobs (a job
// array's waiting tasks: same user, project, priority, submission time and
// shape), so that a cycle does not pay one queue entry, one sort key and
// one placement attempt per task. A cycle treats the group as n jobs in a
// row: it starts them one by one (each a Start with the group's ID; the
// caller maps the k-th to its k-th job) while they start, or while GPUs
// are being freed for them, and the first that can do neither ends the
// group: the rest wait with it, under one Pending with the group's ID.
// Identical jobs left in a row would all wait for the same reason, since
// they fit, or do not fit, the same GPUs; so the decisions are those of n
// separate jobs (TestGroupIsItsJobs).

// more reports whether the group j has jobs left to decide, counting the
// one just decided. Plain jobs (Count 0 or 1) have none.
func (c *cycle) more(j *Job) bool {
	if j.Count <= 1 {
		return false
	}
	if c.left == nil {
		c.left = map[*Job]int{}
	}
	n, ok := c.left[j]
	if !ok {
		n = j.Count
	}
	n--
	c.left[j] = n
	return n > 0
}

// again has the walker yield the group j once more when it has jobs left.
func (c *cycle) again(w walker, j *Job) {
	if c.more(j) {
		w.again()
	}
}
