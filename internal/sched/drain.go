package sched

import (
	"slices"
	"time"
)

// DrainTime is how long s's cluster needs to drain its queued work (the
// given estimates of the jobs queued, and LeftOutWork) with its running
// jobs holding their GPUs until their estimated ends: the first time T at
// which the queued work fits on what every GPU frees by T. A running job
// counts only up to T, so a month-long job running beside a short queue
// adds the GPUs it holds meanwhile, not its month (Backlog counts all of
// it); false without GPUs.
func DrainTime(s *Snapshot) (time.Duration, bool) {
	gpus, queued := queuedWork(s)
	if gpus == 0 {
		return 0, false
	}
	if queued <= 0 {
		return 0, true
	}
	type hold struct{ left, gpus int64 }
	var holds []hold
	held := int64(0) // GPUs held past the current breakpoint
	for i := range s.Running {
		r := &s.Running[i]
		if r.Preempting {
			continue
		}
		if left := r.StartedAt.Add(r.Estimate).Sub(s.Now); left > 0 {
			g := int64(gpuCount(r))
			holds = append(holds, hold{int64(left / time.Second), g})
			held += g
		}
	}
	slices.SortFunc(holds, func(a, b hold) int { return int(a.left - b.left) })
	// Between breakpoints the GPUs free for the queue are gpus-held; the
	// work done for it by time t is the integral of that.
	done, t := int64(0), int64(0)
	for _, h := range holds {
		free := gpus - held
		if free > 0 && done+free*(h.left-t) >= queued {
			return time.Duration(t+(queued-done+free-1)/free) * time.Second, true
		}
		done += max(free, 0) * (h.left - t)
		t = h.left
		held -= h.gpus
	}
	free := gpus - held
	return time.Duration(t+(queued-done+free-1)/free) * time.Second, true
}

// queuedWork is s's GPUs in all and its queued work in GPU-seconds: the
// given estimates of the jobs queued, and LeftOutWork.
func queuedWork(s *Snapshot) (gpus, work int64) {
	for i := range s.Nodes {
		gpus += int64(len(s.Nodes[i].GPUs))
	}
	work = s.LeftOutWork
	for i := range s.Queue {
		work += WorkOf(&s.Queue[i])
	}
	return gpus, work
}
