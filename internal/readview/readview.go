// Package readview builds the API's read views from values the
// orchestrator has already copied under its read lock: a job in memory
// or read from the store as the API shows it, the filter of GET /jobs
// and a page of it merged from memory and the store, the queue's rows,
// their order and a page of them (all of them, or one user's), the
// queue's statistics, a plan's start range, a what-if's answer from a
// snapshot, and GET /cluster/gpu-status from each GPU's holders. It is
// pure: no lock, no store, no clock (the time is given). The orchestrator
// takes its read lock, copies what a view needs, releases it, and calls
// these.
package readview

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/sizes"
	"github.com/corral-sched/corral/internal/sched"
)

// PageBytes bounds a page of GET /jobs (and GET /queue) by size as well
// as by count: a page stops, with its next cursor, once its jobs' JSON
// would pass about this many bytes (three listings of 400 jobs
// of 1 MB each, 396 MB of JSON apiece, took the server to 6.3 GB).
const PageBytes = 8 << 20

// JobBytes estimates a job's JSON: its own text (package sizes) and about
// a kilobyte of the rest.
func JobBytes(j *api.Job) int64 { return sizes.JobBytes(j) + 1024 }

// Ended copies a job read from the store for the API: its env and
// allocation copied (an empty allocation, not null), its events only
// when asked for.
func Ended(j *api.Job, withEvents bool) api.Job {
	v := *j
	v.Env = maps.Clone(j.Env)
	v.Allocation = slices.Clone(j.Allocation)
	if v.Allocation == nil {
		v.Allocation = []api.Allocation{}
	}
	if !withEvents {
		v.Events = nil
	}
	return v
}

// MergePage merges a page of jobs from memory (views, newest first) with
// one from the store (old, newest first), at most limit of them and about
// PageBytes, and returns the next page's cursor. A job in both is listed
// once, from the store. When the store's page is full, nothing below its
// last row is listed: the store has not been read there yet.
func MergePage(views, old []api.Job, limit int, full bool) ([]api.Job, string) {
	bound := ""
	if full {
		bound = old[len(old)-1].ID
	}
	stored := make(map[string]bool, len(old))
	for i := range old {
		stored[old[i].ID] = true
	}
	out := make([]api.Job, 0, min(limit, len(views)+len(old)))
	i, k := 0, 0
	size := int64(0)
	for len(out) < limit && size < PageBytes && (i < len(views) || k < len(old)) {
		switch {
		case i < len(views) && stored[views[i].ID]:
			i++ // ended meanwhile: listed from the store
		case k >= len(old) || (i < len(views) && views[i].ID > old[k].ID):
			if views[i].ID < bound {
				i = len(views) // on the next page
				continue
			}
			out = append(out, views[i])
			size += JobBytes(&views[i])
			i++
		default:
			out = append(out, Ended(&old[k], false))
			size += JobBytes(&old[k])
			k++
		}
	}
	next := ""
	switch {
	case len(out) == limit || (size >= PageBytes && (i < len(views) || k < len(old) || full)):
		next = out[len(out)-1].ID
	case full:
		next = bound
	}
	return out, next
}

// PageQueue keeps the rows of r after the first after, at most limit of
// them and about PageBytes of JSON, with their waits as of now, and sets
// the next cursor. r's rows are not changed (a cache may share them).
func PageQueue(r api.QueueResponse, after, limit int, now time.Time) api.QueueResponse {
	rows := r.QueuedJobs[min(after, len(r.QueuedJobs)):]
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	size := int64(0)
	for i := range rows {
		if size += QueuedRowBytes(&rows[i]); size >= PageBytes && i+1 < len(rows) {
			rows = rows[:i+1]
			break
		}
	}
	if n := after + len(rows); n < len(r.QueuedJobs) {
		r.NextCursor = strconv.Itoa(n)
	}
	r.QueuedJobs = slices.Clone(rows) // the cache's rows are shared
	for i := range r.QueuedJobs {
		r.QueuedJobs[i].WaitClock(now)
	}
	return r
}

// QueuedRowBytes estimates a queue row's JSON: its text and about 600
// bytes of the rest.
func QueuedRowBytes(q *api.QueuedJob) int64 {
	return int64(len(q.ID)+len(q.Name)+len(q.User)+len(q.Project)+len(q.PendingReason)+len(q.PendingMessage)+len(q.ArrayJobID)+len(q.EstimateBasis)) + 600
}

// StartRange is a plan's start and its range as the API shows them (UTC).
func StartRange(sr sched.StartRange) (at, from, to *time.Time) {
	a, f, t := sr.At.UTC(), sr.From.UTC(), sr.To.UTC()
	return &a, &f, &t
}

// Percentile is the p-th percentile of sorted values, nearest rank.
func Percentile(sorted []float64, p float64) float64 {
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
