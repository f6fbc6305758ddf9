package main

import (
	"fmt"

	"github.com/corral-sched/corral/internal/api"
)

// Short numbers: every table that lists jobs shows a job's
// number first (NUM), and every command that takes a job id takes it, or
// a task's NUMBER_INDEX, or a name that names exactly one of the caller's
// jobs: the server resolves them (README "Job ids").

// numCell is a job's NUM cell: its number ("1234"), a task's
// ("1234_7"), or "-" for a job submitted before numbers existed.
func numCell(number int64, task *int) string {
	if s := api.ShortID(number, task); s != "" {
		return s
	}
	return "-"
}

// arrayNumber is an array's Number line: "1234 (tasks 1234_0 to 1234_9)".
func arrayNumber(a api.Array) string {
	if a.Number <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d (tasks %d_%d to %d_%d)", a.Number, a.Number, a.TaskMin, a.Number, a.TaskMax)
}

// numberNote is "number 1234, " for a job or array that has one: what
// the submission's line says first, so that the number is what people
// see (and type) from the start.
func numberNote(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("number %d, ", n)
}
