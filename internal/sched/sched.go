// Package sched is Corral's scheduling core: a pure function from a snapshot
// of the cluster and the queue to decisions. It does no I/O, starts no
// goroutines and never reads the clock (the snapshot carries the time), so
// the live orchestrator and the trace simulator run exactly the same code.
//
// A cycle has three steps:
//
//  1. order the queue by the active policy (Order);
//  2. walk it in that order, placing each job all-or-nothing (a gang) on
//     nodes that pass the filters (schedulable, GPU type, GPU memory) and
//     score best (best fit, so whole nodes stay free for big gangs);
//  3. stop starting jobs at the first one that does not fit, so the head of
//     the queue is never overtaken (backfill arrives with the next slice),
//     and give every job left waiting a reason.
package sched

import (
	"time"
)

// GPU is one device of a node as the core sees it.
type GPU struct {
	Index     int
	Model     string
	MemoryMiB int64
	Free      bool // neither allocated to a job nor held
}

// Node is one node as the core sees it.
type Node struct {
	ID          string
	Schedulable bool // false: nothing new starts here
	GPUs        []GPU
}

// Job is one queued job as the core sees it.
type Job struct {
	ID           string
	User         string
	Project      string
	Priority     int       // 1 (low) .. 4 (critical)
	SubmittedAt  time.Time // queue order within a priority
	GPUs         int       // GPUs per node
	Nodes        int       // nodes of the gang; 0 means 1
	MinMemoryMiB int64     // minimum memory per GPU
	GPUType      string    // case-insensitive substring of the GPU model; empty: any
}

// Policy names the ordering of the queue.
type Policy struct {
	Name string
}

// The policies this core implements.
const (
	PolicyPriority = "priority" // priority, then submission order
	PolicyFCFS     = "fcfs"     // submission order alone
)

// Policies lists the policy names the core accepts.
func Policies() []string { return []string{PolicyPriority, PolicyFCFS} }

// Snapshot is everything a cycle decides on. The core does not modify it.
type Snapshot struct {
	Now    time.Time
	Nodes  []Node
	Queue  []Job // queued jobs, in any order
	Policy Policy
}

// Placement is the GPUs a job gets on one node.
type Placement struct {
	NodeID string
	GPUs   []int // GPU indexes
}

// Start is a decision to start a job on the given placements (one per node).
type Start struct {
	JobID      string
	Placements []Placement
}

// Pending says why a job stays queued.
type Pending struct {
	JobID    string
	Position int    // 1-based position in the policy's order
	Reason   string // machine-readable, one of the Reason constants
	Message  string // a sentence for people
}

// Reasons a job stays queued.
const (
	// ReasonResources: not enough free GPUs that match the job right now.
	ReasonResources = "insufficient_gpus"
	// ReasonBehindHead: the job would fit, but an earlier job does not, and
	// jobs are not started past it.
	ReasonBehindHead = "waiting_for_head"
	// ReasonUnsatisfiable: no node could ever run the job as asked.
	ReasonUnsatisfiable = "unsatisfiable"
)

// Result is the outcome of one cycle.
type Result struct {
	Starts  []Start   // in the order they were decided
	Pending []Pending // every job not started, in queue order
}

// Schedule runs one cycle over the snapshot.
func Schedule(s Snapshot) Result {
	queue := Order(s.Queue, s.Policy)
	free := newFreeMap(s.Nodes)
	res := Result{Starts: make([]Start, 0, 8)}
	var blocker *Job
	var blockerWhy string
	for i := range queue {
		j := &queue[i]
		pos := i + 1
		if blocker != nil {
			res.Pending = append(res.Pending, Pending{
				JobID: j.ID, Position: pos - len(res.Starts), Reason: ReasonBehindHead,
				Message: "waiting behind job " + blocker.ID + ", which is first in line (" + blockerWhy + ")",
			})
			continue
		}
		placements, why, ok := place(free, j)
		if !ok {
			reason := ReasonResources
			if !fitsEmpty(s.Nodes, j) {
				reason = ReasonUnsatisfiable
			}
			res.Pending = append(res.Pending, Pending{JobID: j.ID, Position: pos - len(res.Starts), Reason: reason, Message: why})
			if reason == ReasonResources {
				blocker, blockerWhy = j, why
			}
			continue
		}
		free.take(placements)
		res.Starts = append(res.Starts, Start{JobID: j.ID, Placements: placements})
	}
	return res
}
