package api

import "strconv"

// ShortID is how people name a job: its number ("1234"), or
// for a task of an array its array's number and its index ("1234_7");
// "" for a job that has no number (submitted before numbers existed).
func ShortID(number int64, task *int) string {
	if number <= 0 {
		return ""
	}
	s := strconv.FormatInt(number, 10)
	if task != nil {
		s += "_" + strconv.Itoa(*task)
	}
	return s
}

// ShortID is the job's number as people type it: "1234", or "1234_7"
// for a task of an array.
func (j *Job) ShortID() string { return ShortID(j.Number, j.ArrayTaskID) }

// JobRef is one of the caller's unfinished jobs or job arrays, as GET
// /complete/jobs lists them for shell completion: what to type (Number)
// and what to show beside it (Name, State).
type JobRef struct {
	Number int64  `json:"number"`          // 0: a job without one (type its ID)
	ID     string `json:"id"`              // the job's, or the array's
	Name   string `json:"name,omitempty"`  // the job's name
	State  State  `json:"state"`           // an array's: running while a task is active, else queued
	Array  bool   `json:"array,omitempty"` // a job array: Number names it whole, Number_INDEX a task
}

// JobRefList is GET /complete/jobs: the caller's unfinished jobs and
// arrays, newest first.
type JobRefList struct {
	Jobs []JobRef `json:"jobs"`
}
