package arrays

import (
	"fmt"
	"slices"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

// Job arrays in the scheduling cycle: how an array's waiting tasks enter
// the snapshot (one group per array, within its throttle), how the
// core's starts of a group map back to tasks, and why each task waits.

// Grouped reports whether j is a task that enters the snapshot with its
// array's group (AddGroups) rather than on its own. Tasks that wait on
// dependencies go the plain queue's way, one by one (within their
// throttle, Admit), so that whatever holds a job for its dependencies
// holds them too.
func Grouped(j *api.Job) bool { return j.ArrayJobID != "" && j.DependsOn == "" }

// Admit returns a function that tells, for each task handed to the plain
// queue's snapshot one by one, whether its array's throttle lets it in:
// at most the array's headroom of them, in the order asked. Lock held.
func (b *Books) Admit() func(j *api.Job) bool {
	var room map[string]int
	return func(j *api.Job) bool {
		a := b.byID[j.ArrayJobID]
		if a == nil || a.rec.Throttle <= 0 {
			return true
		}
		if room == nil {
			room = map[string]int{}
		}
		n, ok := room[a.rec.ID]
		if !ok {
			n = a.room()
		}
		if n <= 0 {
			return false
		}
		room[a.rec.ID] = n - 1
		return true
	}
}

// Groups are the arrays whose identical waiting tasks a snapshot holds
// as one entry, by the id of that entry (the group's first waiting task).
type Groups map[string]*array

// AddGroups appends to snap.Queue the waiting tasks of every array that
// may start some: its odd tasks one by one, then its identical ones as
// one sched.Job standing for them all (Count), both within the
// throttle's headroom; entry is a queued job as the core sees it. It
// returns the groups (for NotePending and Next). Lock held (read is
// enough).
//
// An array whose tasks have dependencies is left to the plain queue's
// path (see Grouped).
func (b *Books) AddGroups(snap *sched.Snapshot, entry func(*api.Job) sched.Job) Groups {
	if len(b.waiting) == 0 {
		return nil
	}
	ids := make([]string, 0, len(b.waiting))
	for id := range b.waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	groups := make(Groups, len(ids))
	for _, id := range ids {
		a := b.waiting[id]
		room := a.room()
		if room <= 0 || a.tmpl.DependsOn != "" {
			continue // at its throttle; or its tasks wait on dependencies, one by one (Grouped)
		}
		if len(a.odd) > 0 {
			odd := make([]*api.Job, 0, len(a.odd))
			for _, t := range a.odd {
				odd = append(odd, t)
			}
			slices.SortFunc(odd, func(x, y *api.Job) int { return *x.ArrayTaskID - *y.ArrayTaskID })
			for _, t := range odd[:min(len(odd), room)] {
				snap.Queue = append(snap.Queue, entry(t))
			}
			room -= min(len(odd), room)
		}
		n := min(a.rec.Counts.Queued-len(a.odd), room)
		if n <= 0 {
			continue
		}
		rep := a.firstPlain()
		if rep == nil {
			continue
		}
		sj := entry(rep)
		sj.Count = n
		snap.Queue = append(snap.Queue, sj)
		groups[rep.ID] = a
	}
	return groups
}

// Next is the job a cycle's start of j is for: j itself, or, when j is
// a group's entry that has already started, the next identical waiting
// task of its array. Write lock held.
func (b *Books) Next(j *api.Job, groups Groups) *api.Job {
	if a := groups[j.ID]; a != nil && j.State != api.StateQueued {
		if t := a.firstPlain(); t != nil {
			return t
		}
	}
	return j
}

// NotePending records why each array's group waits (res's Pending of its
// entry), in place of the last cycle's reasons. Write lock held.
func (b *Books) NotePending(groups Groups, res *sched.Result) {
	if len(b.pend) > 0 {
		clear(b.pend)
	}
	if len(groups) == 0 {
		return
	}
	for _, p := range res.Pending {
		if a := groups[p.JobID]; a != nil {
			b.pend[a.rec.ID] = p
		}
	}
}

// Pending fills in v, the view of queued task j, with why it waits when
// the last cycle did not say so of the task itself: its array is at its
// throttle, or the array's identical tasks wait together for the reason
// of the first. Read lock held.
func (b *Books) Pending(j *api.Job, v *api.Job) {
	a := b.byID[j.ArrayJobID]
	if a == nil {
		return
	}
	if a.room() <= 0 {
		v.PendingReason = api.ReasonArrayThrottle
		v.PendingMessage = fmt.Sprintf("array %s runs at most %d tasks at once, and %d are active", a.rec.ID, a.rec.Throttle, a.rec.Counts.Active())
		return
	}
	if p, ok := b.pend[a.rec.ID]; ok {
		v.QueuePosition, v.PendingReason, v.PendingMessage = p.Position, p.Reason, p.Message()
		return
	}
	if a.rec.Throttle > 0 {
		v.PendingReason = api.ReasonArrayThrottle
		v.PendingMessage = fmt.Sprintf("array %s runs at most %d tasks at once: this one waits for earlier tasks to start or end", a.rec.ID, a.rec.Throttle)
	}
}

// QueueSize is how many jobs a snapshot's queue stands for: an array's
// group counts as its tasks (a queue of 100 groups of 1,000 is a large
// queue).
func QueueSize(q []sched.Job) int {
	n := 0
	for i := range q {
		n += max(q[i].Count, 1)
	}
	return n
}
