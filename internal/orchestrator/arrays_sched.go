package orchestrator

import (
	"fmt"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/bookings"
	"github.com/corral-sched/corral/internal/sched"
)

// Job arrays in the scheduling cycle: how an array's waiting tasks enter
// the snapshot (one group per array, within its throttle), how the
// core's starts of a group map back to tasks, and why each task waits.

// grouped reports whether j is a task that enters the snapshot with its
// array's group (snapshotArrays) rather than on its own. Tasks that wait
// on dependencies go the plain queue's way, one by one (within their
// throttle, arrayAdmit), so that whatever holds a job for its
// dependencies holds them too.
func grouped(j *api.Job) bool { return j.ArrayJobID != "" && j.DependsOn == "" }

// arrayAdmit returns a function that tells, for each task handed to the
// plain queue's snapshot one by one, whether its array's throttle lets it
// in: at most the array's headroom of them, in the order asked. Lock held.
func (o *Orchestrator) arrayAdmit() func(j *api.Job) bool {
	var room map[string]int
	return func(j *api.Job) bool {
		a := o.arr.byID[j.ArrayJobID]
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

// snapshotArrays appends to snap.Queue the waiting tasks of every array
// that may start some: its odd tasks one by one, then its identical ones
// as one sched.Job standing for them all (Count), both within the
// throttle's headroom. It returns the arrays by the id of their group's
// entry (its first waiting task). Lock held (read is enough).
//
// An array whose tasks have dependencies is left to the plain queue's
// path (see grouped).
func (o *Orchestrator) snapshotArrays(snap *sched.Snapshot, est func(*api.Job) (time.Duration, bool)) map[string]*array {
	if len(o.arr.waiting) == 0 {
		return nil
	}
	ids := make([]string, 0, len(o.arr.waiting))
	for id := range o.arr.waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	groups := make(map[string]*array, len(ids))
	for _, id := range ids {
		a := o.arr.waiting[id]
		room := a.room()
		if room <= 0 || a.tmpl.DependsOn != "" {
			continue // at its throttle; or its tasks wait on dependencies, one by one (grouped)
		}
		if len(a.odd) > 0 {
			odd := make([]*api.Job, 0, len(a.odd))
			for _, t := range a.odd {
				odd = append(odd, t)
			}
			slices.SortFunc(odd, func(x, y *api.Job) int { return *x.ArrayTaskID - *y.ArrayTaskID })
			for _, t := range odd[:min(len(odd), room)] {
				snap.Queue = append(snap.Queue, schedJob(t, est))
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
		sj := schedJob(rep, est)
		sj.Count = n
		snap.Queue = append(snap.Queue, sj)
		groups[rep.ID] = a
	}
	return groups
}

// schedJob is a queued job as the core sees it.
func schedJob(j *api.Job, est func(*api.Job) (time.Duration, bool)) sched.Job {
	e, given := est(j)
	sj := sched.Job{
		ID: j.ID, User: j.User, Project: j.Project, Priority: int(j.Priority), SubmittedAt: j.SubmittedAt,
		GPUs: j.GPUCount, Nodes: j.Nodes, MinMemoryMiB: int64(j.GPUMemoryGB * 1024), GPUType: j.GPUType,
		Estimate: e, EstimateGiven: given, NodeLabels: j.NodeLabels, Class: j.Class,
	}
	if j.NotBefore != nil {
		sj.NotBefore = *j.NotBefore
	}
	if j.Begin != nil && j.Begin.After(sj.NotBefore) { // jobio.go: sbatch --begin
		sj.NotBefore, sj.Begin = *j.Begin, true
	}
	elasticJob(&sj, j)    // elastic.go
	bookings.View(&sj, j) // feature/bookings
	return sj
}

// startTarget is the job a cycle's start of id is for: id itself, or,
// when id is an array's group entry that has already started, the next
// identical waiting task of its array. Write lock held.
func (o *Orchestrator) startTarget(id string, groups map[string]*array) *api.Job {
	j := o.jobs[id]
	if a := groups[id]; a != nil && j.State != api.StateQueued {
		if t := a.firstPlain(); t != nil {
			return t
		}
	}
	return j
}

// notePending records why each array's group waits (res's Pending of its
// entry). Write lock held.
func (o *Orchestrator) notePending(groups map[string]*array, res *sched.Result) {
	if len(o.arr.pend) > 0 {
		clear(o.arr.pend)
	}
	if len(groups) == 0 {
		return
	}
	for _, p := range res.Pending {
		if a := groups[p.JobID]; a != nil {
			o.arr.pend[a.rec.ID] = p
		}
	}
}

// arrayPending fills in why a queued task waits when the last cycle did
// not say so of the task itself: its array is at its throttle, or the
// array's identical tasks wait together for the reason of the first.
// Read lock held.
func (o *Orchestrator) arrayPending(j *api.Job, v *api.Job) {
	a := o.arr.byID[j.ArrayJobID]
	if a == nil {
		return
	}
	if a.room() <= 0 {
		v.PendingReason = api.ReasonArrayThrottle
		v.PendingMessage = fmt.Sprintf("array %s runs at most %d tasks at once, and %d are active", a.rec.ID, a.rec.Throttle, a.rec.Counts.Active())
		return
	}
	if p, ok := o.arr.pend[a.rec.ID]; ok {
		v.QueuePosition, v.PendingReason, v.PendingMessage = p.Position, p.Reason, p.Message()
		return
	}
	if a.rec.Throttle > 0 {
		v.PendingReason = api.ReasonArrayThrottle
		v.PendingMessage = fmt.Sprintf("array %s runs at most %d tasks at once: this one waits for earlier tasks to start or end", a.rec.ID, a.rec.Throttle)
	}
}

// queueSize is how many jobs a snapshot's queue stands for: an array's
// group counts as its tasks (a queue of 100 groups of 1,000 is a large
// queue, planned at most every planEvery).
func queueSize(q []sched.Job) int {
	n := 0
	for i := range q {
		n += max(q[i].Count, 1)
	}
	return n
}
