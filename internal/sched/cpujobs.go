package sched

import "fmt"

// Zero-GPU jobs. A job that asks for no GPU takes none from anyone, so
// nothing else in a cycle bounds how many of one user's start: hundreds
// could run on a node at once and take its processes, memory and CPU
// from everyone else's jobs. Snapshot.CPUJobsPerUser caps the zero-GPU
// jobs each user has running; a job past it is not eligible this cycle
// and waits with ReasonUserCPUJobLimit, taking its turn again when one
// of its user's zero-GPU jobs ends. Running zero-GPU jobs are those of
// Snapshot.Running with no GPUs; this cycle's starts count too.

// cpuJobs counts the running zero-GPU jobs of each user, and shares one
// note per user among the jobs the cap keeps waiting.
type cpuJobs struct {
	limit   int
	running map[string]int
	notes   map[string]*noteSrc
}

// newCPUJobs counts the running zero-GPU jobs by user; nil when the
// snapshot sets no cap.
func newCPUJobs(s *Snapshot) *cpuJobs {
	if s.CPUJobsPerUser <= 0 {
		return nil
	}
	cj := &cpuJobs{limit: s.CPUJobsPerUser, running: map[string]int{}}
	for i := range s.Running {
		if r := &s.Running[i]; gpuCount(r) == 0 {
			cj.running[r.User]++
		}
	}
	return cj
}

// cpuCapped reports whether starting the zero-GPU job j now would take
// its user past the cap.
func (c *cycle) cpuCapped(j *Job) bool {
	return c.cpu != nil && j.GPUs == 0 && c.cpu.running[j.User] >= c.cpu.limit
}

// pendCPU records that j waits for one of its user's zero-GPU jobs to
// end (cpuCapped).
func (c *cycle) pendCPU(j *Job) {
	cj := c.cpu
	src := cj.notes[j.User]
	if src == nil {
		n, jobs := cj.running[j.User], "jobs"
		if n == 1 {
			jobs = "job"
		}
		src = &noteSrc{text: fmt.Sprintf("user %s has %d %s without GPUs running; the limit is %d per user (--max-running-cpu-jobs-per-user)",
			j.User, n, jobs, cj.limit)}
		if cj.notes == nil {
			cj.notes = map[string]*noteSrc{}
		}
		cj.notes[j.User] = src
	}
	c.pend(Pending{JobID: j.ID, Reason: ReasonUserCPUJobLimit, note: note{kind: noteText, src: src}})
}

// cpuStarted counts a start of a zero-GPU job toward its user's cap.
func (c *cycle) cpuStarted(j *Job) {
	if c.cpu != nil && j.GPUs == 0 {
		c.cpu.running[j.User]++
	}
}
