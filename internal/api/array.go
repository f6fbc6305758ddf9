package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxArraySize is how many tasks one job array may have unless the
// server's --max-array-size says otherwise.
const DefaultMaxArraySize = 10000

// ArraySpec is a parsed job array expression (Slurm's --array grammar).
type ArraySpec struct {
	Indexes  []int // the task indexes, ascending, without repeats
	Throttle int   // %N: at most N tasks active at once; 0: no limit
}

// ParseArray parses Slurm's --array grammar: comma-separated items, each an
// index ("7"), a range ("0-99") or a range with a step ("0-99:4"),
// optionally followed by "%N", the most tasks that may run at once
// ("0-999%16"). Indexes are 0 or more; a range must not be reversed, a step
// must be 1 or more, no index may be given twice, and there may be at most
// max tasks (max <= 0: DefaultMaxArraySize). Errors are sentences without
// the field's name; callers wrap them (Invalid("array", ...)).
func ParseArray(s string, max int) (ArraySpec, error) {
	if max <= 0 {
		max = DefaultMaxArraySize
	}
	var spec ArraySpec
	s = strings.TrimSpace(s)
	if s == "" {
		return spec, fmt.Errorf("is empty; want indexes such as 0-99, 0-99:4, 1,5,9-12 or 0-999%%16")
	}
	body, throttle, hasThrottle := strings.Cut(s, "%")
	if hasThrottle {
		n, err := strconv.Atoi(throttle)
		if err != nil || n < 1 {
			return spec, fmt.Errorf("the throttle %%%s must be a whole number of 1 or more", clipText(throttle))
		}
		spec.Throttle = n
	}
	if strings.TrimSpace(body) == "" {
		return spec, fmt.Errorf("has no indexes before the %%; want e.g. 0-99%%8")
	}
	for _, item := range strings.Split(body, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return spec, fmt.Errorf("%q has an empty item between commas", clipText(s))
		}
		lo, hi, step, err := parseArrayItem(item)
		if err != nil {
			return spec, err
		}
		// Count before expanding, so "0-2000000000" costs nothing.
		if n := (hi-lo)/step + 1; n > max || len(spec.Indexes)+n > max {
			return spec, fmt.Errorf("has more than %d tasks, the most one array may have on this server", max)
		}
		for i := lo; i <= hi; i += step {
			spec.Indexes = append(spec.Indexes, i)
		}
	}
	slices.Sort(spec.Indexes)
	for i := 1; i < len(spec.Indexes); i++ {
		if spec.Indexes[i] == spec.Indexes[i-1] {
			return spec, fmt.Errorf("gives index %d more than once", spec.Indexes[i])
		}
	}
	return spec, nil
}

// maxArrayIndex bounds an index, so that lo + step never overflows.
const maxArrayIndex = 1<<31 - 1

// parseArrayItem parses "N", "A-B" or "A-B:S".
func parseArrayItem(item string) (lo, hi, step int, err error) {
	rng, st, hasStep := strings.Cut(item, ":")
	step = 1
	if hasStep {
		if step, err = strconv.Atoi(st); err != nil || step < 1 {
			return 0, 0, 0, fmt.Errorf("%q: the step must be a whole number of 1 or more", clipText(item))
		}
	}
	a, b, isRange := strings.Cut(rng, "-")
	if !isRange && hasStep {
		return 0, 0, 0, fmt.Errorf("%q: a step needs a range, as in 0-99:4", clipText(item))
	}
	if lo, err = parseIndex(a, item); err != nil {
		return 0, 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = parseIndex(b, item); err != nil {
			return 0, 0, 0, err
		}
		if hi < lo {
			return 0, 0, 0, fmt.Errorf("%q is a reversed range (%d is less than %d)", clipText(item), hi, lo)
		}
	}
	return lo, hi, step, nil
}

func parseIndex(s, item string) (int, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") || s == "" {
		return 0, fmt.Errorf("%q: indexes are whole numbers of 0 or more", clipText(item))
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxArrayIndex {
		return 0, fmt.Errorf("%q: indexes are whole numbers from 0 to %d", clipText(item), maxArrayIndex)
	}
	return n, nil
}

func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Reasons of array tasks.
const (
	// ReasonArrayThrottle: a queued task of an array waits because the
	// array already has its throttle's worth of tasks active.
	ReasonArrayThrottle = "array_throttle"
)

// ArrayCounts is how many tasks of an array are in each state.
type ArrayCounts struct {
	Queued     int `json:"queued"`
	Scheduled  int `json:"scheduled"`
	Allocating int `json:"allocating"`
	Running    int `json:"running"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	Canceled   int `json:"canceled"`
}

// Add counts one task in state s (n: +1 or -1).
func (c *ArrayCounts) Add(s State, n int) {
	switch s {
	case StateQueued:
		c.Queued += n
	case StateScheduled:
		c.Scheduled += n
	case StateAllocating:
		c.Allocating += n
	case StateRunning:
		c.Running += n
	case StateCompleted:
		c.Completed += n
	case StateFailed:
		c.Failed += n
	case StateCanceled:
		c.Canceled += n
	}
}

// Active is the tasks that hold (or are about to hold) GPUs.
func (c ArrayCounts) Active() int { return c.Scheduled + c.Allocating + c.Running }

// Total is every task.
func (c ArrayCounts) Total() int { return c.Unfinished() + c.Completed + c.Failed + c.Canceled }

// Unfinished is the tasks that have not ended.
func (c ArrayCounts) Unfinished() int { return c.Queued + c.Active() }

// Array is a job array as GET /arrays/{id} shows it: its spec and its
// tasks' counts by state. Its tasks are jobs ID_INDEX.
type Array struct {
	ID          string      `json:"id"`
	Number      int64       `json:"number,omitempty"` // the array's short number; its tasks are NUMBER_INDEX
	Name        string      `json:"name,omitempty"`
	User        string      `json:"user"`
	Project     string      `json:"project"`
	Array       string      `json:"array"`      // the expression as submitted, e.g. "0-999%16"
	Throttle    int         `json:"throttle"`   // at most this many tasks active at once; 0: no limit
	TaskCount   int         `json:"task_count"` // CORRAL_ARRAY_TASK_COUNT
	TaskMin     int         `json:"task_min"`   // CORRAL_ARRAY_TASK_MIN
	TaskMax     int         `json:"task_max"`   // CORRAL_ARRAY_TASK_MAX
	GPUCount    int         `json:"gpu_count"`  // per task, per node
	Nodes       int         `json:"nodes"`
	Priority    Priority    `json:"priority"`
	Command     string      `json:"command"`
	SubmittedAt time.Time   `json:"submitted_at"`
	State       State       `json:"state"` // running while any task is active; queued while any waits; else failed, canceled or completed
	Counts      ArrayCounts `json:"counts"`
	// Tasks lists the task indexes (GET /arrays/{id} only).
	Tasks []int `json:"tasks,omitempty"`
}

// ArrayRequest is the body of PATCH /arrays/{id}.
type ArrayRequest struct {
	// Throttle: at most this many tasks active at once; 0 lifts the limit.
	Throttle *int `json:"throttle"`
}

// SubmitAnswer is POST /queue/submit's answer: the job; for an array, its
// first task, with the array's summary.
type SubmitAnswer struct {
	Job
	ArraySummary *Array `json:"array,omitempty"`
}

// ArrayList is GET /arrays.
type ArrayList struct {
	Arrays []Array `json:"arrays"`
}
