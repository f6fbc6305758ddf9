// Package ended keeps the books of jobs that ended and left the
// orchestrator's memory. A job that ends (completed, failed, canceled)
// leaves the live books once the batch that ended it is committed: from
// then on the store holds it, and views read it from there. What memory
// keeps of ended jobs is here: the last Recent of them (a ring, for views
// and log tails that come just after a job ends, and for dependencies),
// how many ended in each state (the counts the API shows), how many ids
// of the submission order are stale, the row the store's summary of ended
// jobs gets for each, and that summary read back at recovery.
package ended

import (
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// Recent is how many of the jobs that ended last stay in memory (about
// 2 KiB each; a large one without its command and env) after they leave
// the live books.
const Recent = 4096

// Books are the jobs that ended and left the live books.
type Books struct {
	ring    []*api.Job
	next    int
	byID    map[string]*api.Job
	slim    map[string]bool   // ids kept without their command and env
	stale   int               // ids in the submission order whose jobs left
	byState map[api.State]int // how many left, by state
}

// Remember keeps j among the recent, forgetting the oldest when full.
// slim: j is a copy without its large text, not the whole job.
func (b *Books) Remember(j *api.Job, slim bool) {
	if slim {
		if b.slim == nil {
			b.slim = map[string]bool{}
		}
		b.slim[j.ID] = true
	}
	if b.byID[j.ID] == j {
		return // already there
	}
	if b.byID == nil {
		b.byID = make(map[string]*api.Job, Recent)
		b.ring = make([]*api.Job, Recent)
	}
	if old := b.ring[b.next]; old != nil && b.byID[old.ID] == old {
		delete(b.byID, old.ID)
		delete(b.slim, old.ID)
	}
	b.ring[b.next] = j
	b.byID[j.ID] = j
	b.next = (b.next + 1) % len(b.ring)
}

// Get returns a recent job by id.
func (b *Books) Get(id string) (*api.Job, bool) {
	j, ok := b.byID[id]
	return j, ok
}

// Slim reports whether memory keeps id without its command and env: a
// view must read the whole job from the store.
func (b *Books) Slim(id string) bool { return b.slim[id] }

// All yields the recent jobs, in no order.
func (b *Books) All() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, j := range b.byID {
			if !yield(j) {
				return
			}
		}
	}
}

// Forget takes a job out of the recent ones (as after a restart, or once
// pruned).
func (b *Books) Forget(id string) {
	delete(b.byID, id)
	delete(b.slim, id)
}

// Left counts jobs that left the live books. It reports whether the
// submission order should be compacted: its stale ids are more than half
// of its length orderLen (the count starts again).
func (b *Books) Left(gone []*api.Job, orderLen int) (compact bool) {
	if b.byState == nil {
		b.byState = map[api.State]int{}
	}
	for _, j := range gone {
		b.byState[j.State]++
	}
	b.stale += len(gone)
	if b.stale > orderLen/2+1024 {
		b.stale = 0
		return true
	}
	return false
}

// Pruned takes a job deleted from the store (--keep-history) out of the
// counts and the recent ones.
func (b *Books) Pruned(p store.PrunedJob) {
	if b.byState[p.State] > 0 {
		b.byState[p.State]--
	}
	b.Forget(p.ID)
}

// ByState yields how many jobs left memory in each state.
func (b *Books) ByState() iter.Seq2[api.State, int] {
	return func(yield func(api.State, int) bool) {
		for s, n := range b.byState {
			if !yield(s, n) {
				return
			}
		}
	}
}

// Row is what the store's summary of ended jobs counts of j, which ended
// at at (or at j.FinishedAt, when set).
func Row(j *api.Job, at time.Time) store.EndedJob {
	end := store.EndedJob{User: j.User, Project: j.Project, State: j.State, FinishedAt: at, GPUSeconds: j.GPUSeconds}
	if j.FinishedAt != nil {
		end.FinishedAt = *j.FinishedAt
	}
	if j.State == api.StateCompleted && j.StartedAt != nil {
		end.RunSeconds = end.FinishedAt.Sub(*j.StartedAt).Seconds()
	}
	return end
}

// EstimatorRuns is how many of a user's last completed runs the run-time
// estimator is rebuilt from (it averages the last 20).
const EstimatorRuns = 20

// Runs is a user's completed runs as the summary of ended jobs gives them
// back: how many (at most EstimatorRuns) and their mean run time.
type Runs struct {
	N    int
	Mean time.Duration
}

// Load counts the ended jobs of the store's summary (one row per user,
// project, hour and state; by user, newest hour first) by state, in place
// of what was counted, and returns each user's last completed runs.
func (b *Books) Load(rows []store.UsageRow) map[string]Runs {
	type runs struct {
		jobs int
		secs float64
	}
	perUser := map[string]*runs{}
	b.byState = map[api.State]int{}
	for _, r := range rows {
		if r.Jobs > 0 {
			b.byState[r.State] += r.Jobs
		}
		if r.State != api.StateCompleted || r.Jobs <= 0 {
			continue
		}
		u := perUser[r.User]
		if u == nil {
			u = &runs{}
			perUser[r.User] = u
		}
		if u.jobs < EstimatorRuns {
			u.jobs += r.Jobs
			u.secs += r.RunSeconds
		}
	}
	out := make(map[string]Runs, len(perUser))
	for user, u := range perUser {
		out[user] = Runs{N: min(u.jobs, EstimatorRuns), Mean: time.Duration(u.secs / float64(u.jobs) * float64(time.Second))}
	}
	return out
}

// Summarize adds to the batch the summary row of each job (not array
// tasks: package arrays adds theirs when their array is done) that one of
// its events ends; changed is the jobs the batch changed, by id. Before
// the commit, so that the rows are durable with the ends.
func Summarize(b *store.Batch, changed map[string]*api.Job) {
	for _, e := range b.Events {
		if !e.Event.To.Terminal() {
			continue
		}
		j := changed[e.JobID]
		if j == nil || j.ArrayJobID != "" {
			continue
		}
		b.Ended = append(b.Ended, Row(j, e.Event.At))
	}
}

// Rebuild adds what ended jobs, kept only in the store, gave the
// fair-share ledger (GPU time by user, project and hour: each hour's
// charged at its middle) and the run-time estimator (each user's mean run
// time over their last EstimatorRuns completed jobs), and counts them by
// state (Load), from the store's summary (one row per user, project, hour
// and state; by user, newest hour first).
func (b *Books) Rebuild(rows []store.UsageRow, ledger *sched.Ledger, est *sched.Estimator) {
	for _, r := range rows {
		if r.GPUSeconds > 0 {
			ledger.Add(r.User, r.Project, r.GPUSeconds, r.Hour.Add(30*time.Minute))
		}
	}
	for user, u := range b.Load(rows) {
		for range u.N {
			est.Observe(user, u.Mean)
		}
	}
}
