// Package limits is the feature that bounds what users may queue and
// run: a job's GPUs and time limit, the queue's length in all and per
// user, and interactive work (its time limit and each user's interactive
// GPUs, holds included). It checks a submission at submit and a hold
// that may become a job; it reads the queue through its Books, which the
// orchestrator implements.
package limits

import (
	"fmt"
	"iter"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/feature/jobio"
	"github.com/corral-sched/corral/internal/feature/reclaim"
)

// Limits bound what users may queue and run. Zero means no limit.
type Limits struct {
	MaxQueueSize     int           // queued jobs in all (the seed's CORRAL_MAX_QUEUE_SIZE)
	MaxQueuedPerUser int           // queued jobs of one user (admins submitting are exempt)
	MaxGPUsPerJob    int           // gpu_count x nodes of one job
	MaxRunTime       time.Duration // a job's time_limit: the default, and the most it may ask
	MaxArraySize     int           // tasks of one job array; 0: api.DefaultMaxArraySize (package arrays)
	// Interactive work: GPUs of one user's interactive jobs and holds,
	// and the longest time limit of an interactive job.
	MaxInteractiveGPUs int
	MaxInteractiveTime time.Duration
	// Sizes (package sizes): bytes of one job's command, of its env (names
	// and values), and of one user's jobs not ended (admins are exempt).
	// 0: the default; negative: no limit.
	MaxCommandBytes    int64
	MaxEnvBytes        int64
	MaxUserQueuedBytes int64
}

// Defaults of the interactive limits (the server's --max-interactive-gpus
// and --max-interactive-time).
const (
	DefaultMaxInteractiveGPUs = 2
	DefaultMaxInteractiveTime = holds.DefaultTime // a hold's default duration too
)

// Books is what the checks read of the orchestrator's job books
// (jobbook.Book is one), under the loop (they run at submit).
type Books interface {
	// Queued is the number of queued jobs in all.
	Queued() int
	// QueuedBy is the number of user's queued jobs.
	QueuedBy(user string) int
	// QueuedJobs yields the queued jobs, Active those holding GPUs
	// (scheduled, allocating, running); both in no order.
	QueuedJobs() iter.Seq[*api.Job]
	Active() iter.Seq[*api.Job]
}

// Holds yields the GPUs held outside the queue (holds.Books is one).
type Holds interface {
	All() iter.Seq[*api.Hold]
}

// Queue checks submissions against the limits.
type Queue struct {
	Limits Limits
	Books  Books
	Holds  Holds // nil: none
}

var _ feature.SubmitCheck = Queue{}

// CheckSubmit checks a valid submission against the limits and gives it
// the default time limit (the interactive one for interactive work).
func (q Queue) CheckSubmit(s *feature.Submission) error {
	j, l := s.Job, q.Limits
	if err := q.checkInteractive(j); err != nil {
		return err
	}
	if l.MaxGPUsPerJob > 0 && j.GPUCount*j.Nodes > l.MaxGPUsPerJob {
		return api.Invalid("gpu_count", "asks for %d GPUs; one job may have at most %d on this server", j.GPUCount*j.Nodes, l.MaxGPUsPerJob)
	}
	if l.MaxRunTime > 0 {
		max := api.Seconds(l.MaxRunTime.Seconds())
		switch {
		case j.TimeLimit == nil:
			j.TimeLimit, j.TimeLimitFrom = &max, jobio.FromDefault
		case j.TimeLimit.Duration() > l.MaxRunTime:
			return api.Invalid("time_limit", "is %s; this server allows at most %s", j.TimeLimit.Duration(), l.MaxRunTime)
		}
	}
	if l.MaxQueueSize > 0 {
		if n := q.Books.Queued(); n >= l.MaxQueueSize {
			return &api.Error{Status: http.StatusTooManyRequests, Code: "queue_full",
				Message: fmt.Sprintf("the queue is full (%d jobs; the limit is %d); try again when some have started", n, l.MaxQueueSize)}
		}
	}
	if l.MaxQueuedPerUser > 0 && !s.Exempt {
		if n := q.Books.QueuedBy(j.User); n >= l.MaxQueuedPerUser {
			return &api.Error{Status: http.StatusTooManyRequests, Code: "user_queue_full",
				Message: fmt.Sprintf("%s has %d jobs queued; the limit is %d per user", j.User, n, l.MaxQueuedPerUser)}
		}
	}
	return nil
}

// checkInteractive applies the interactive limits to a valid interactive
// submission: its time limit defaults to, and may not exceed,
// MaxInteractiveTime (a longer one is refused, not cut: 422 naming
// time_limit), and its user's interactive GPUs, queued or running, with
// holds, may not pass MaxInteractiveGPUs (429 naming the flag). Batch jobs
// pass unchanged.
func (q Queue) checkInteractive(j *api.Job) error {
	if !reclaim.Interactive(j.Class) {
		return nil
	}
	l := q.Limits
	if l.MaxInteractiveTime > 0 {
		def := l.MaxInteractiveTime
		if l.MaxRunTime > 0 {
			def = min(def, l.MaxRunTime)
		}
		max := api.Seconds(def.Seconds())
		switch {
		case j.TimeLimit == nil:
			j.TimeLimit, j.TimeLimitFrom = &max, jobio.FromDefault
		case j.TimeLimit.Duration() > l.MaxInteractiveTime:
			return api.Invalid("time_limit", "is %s; an interactive job may run at most %s on this server (--max-interactive-time)",
				j.TimeLimit.Duration(), l.MaxInteractiveTime)
		}
	}
	if l.MaxInteractiveGPUs > 0 {
		return q.CheckHold(j.User, Asked(j.GPUCount*max(j.Nodes, 1), j.GPUPart))
	}
	return nil
}

// CheckHold refuses n more interactive GPU-equivalents for user (a hold,
// or an interactive job, of n: see Asked) when they would take the user's
// interactive GPUs past MaxInteractiveGPUs. Only holds asked with "wait"
// are refused by it (such a hold may become an interactive job); a hold
// without wait keeps the route's old answers (201 or 409), yet counts
// toward the cap of the user's later interactive work.
func (q Queue) CheckHold(user string, n float64) error {
	l := q.Limits.MaxInteractiveGPUs
	if have := q.interactiveGPUs(user); l > 0 && have+n > float64(l)+equivEps {
		return &api.Error{Status: http.StatusTooManyRequests, Code: "interactive_gpus_exceeded", Field: "gpu_count",
			Message: fmt.Sprintf("%s has %s interactive GPUs queued, running or held; %s more would pass --max-interactive-gpus (%d per user)",
				user, fmtEquiv(have), fmtEquiv(n), l)}
	}
	return nil
}

// interactiveGPUs counts, in GPU-equivalents (JobEquivalents,
// api.Allocation.Equivalents), the GPUs of user's interactive jobs,
// queued or holding GPUs, and of their holds. A scan of the queue:
// interactive submissions are few.
func (q Queue) interactiveGPUs(user string) float64 {
	n := 0.0
	count := func(jobs iter.Seq[*api.Job]) {
		for j := range jobs {
			if j != nil && j.User == user && reclaim.Interactive(j.Class) {
				n += JobEquivalents(j)
			}
		}
	}
	count(q.Books.QueuedJobs())
	count(q.Books.Active())
	if q.Holds == nil {
		return n
	}
	for h := range q.Holds.All() {
		if h.User == user {
			for _, a := range h.Allocation {
				n += a.Equivalents()
			}
		}
	}
	return n
}

// equivEps absorbs the rounding of summed fractions (7 x 1/7 is not
// exactly 1 in floating point).
const equivEps = 1e-9

// fmtEquiv writes GPU-equivalents as a person reads them: 2, 0.14, 1.43.
func fmtEquiv(e float64) string {
	return strconv.FormatFloat(math.Round(e*100)/100, 'f', -1, 64)
}

// Asked is what an interactive job or hold of count GPUs asking for part
// counts against MaxInteractiveGPUs before it is placed: count whole GPUs;
// a MIG slice its compute slices over 7 (the "3" of a 3g.40gb, as on an
// A100 or H100; "any": 1/7, the smallest); an MPS share its compute
// percent, else, its GPU's memory being unknown yet, 1. Once placed, it
// counts its allocation's fraction (JobEquivalents).
func Asked(count int, part api.GPUPart) float64 {
	switch {
	case part.MIGProfile != "":
		var g int
		if _, err := fmt.Sscanf(part.MIGProfile, "%dg.", &g); err != nil || g < 1 {
			g = 1 // "any", or a profile of another form: the smallest
		}
		return min(float64(g)/7, 1)
	case part.GPUShareMiB > 0 && part.GPUCompute > 0:
		return min(float64(part.GPUCompute)/100, 1)
	}
	return float64(count)
}

// JobEquivalents is what a job counts against MaxInteractiveGPUs: its
// allocation in GPU-equivalents while it holds one (a slice or share its
// fraction), else what it asks for (Asked).
func JobEquivalents(j *api.Job) float64 {
	if len(j.Allocation) == 0 {
		return Asked(j.GPUCount*max(j.Nodes, 1), j.GPUPart)
	}
	e := 0.0
	for _, a := range j.Allocation {
		e += a.Equivalents()
	}
	return e
}
