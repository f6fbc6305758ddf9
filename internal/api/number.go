package api

import "strconv"

// ShortID is how people name a job (issue 27): its number ("1234"), or
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
