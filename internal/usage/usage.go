// Package usage is the pure side of Corral's usage ledger: the
// record of every GPU-second of every attempt (jobs, interactive sessions,
// holds, booked-but-idle time), its aggregation by user, project, GPU
// model, node or week over a window [since, until) with clipping, its cost
// at per-model prices, its CSV form, and budgets per calendar month.
//
// Records are written by the orchestrator in the transaction that ends an
// attempt (orchestrator/usage.go) and read back through the store; nothing
// here does I/O or reads the clock.
package usage

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Kinds of records.
const (
	KindJob         = "job"          // an attempt of a batch job
	KindInteractive = "interactive"  // an attempt of an interactive job (alloc, shell, notebook)
	KindHold        = "hold"         // a hold of GPUs for work outside Corral
	KindBookingIdle = "booking_idle" // GPU time booked but left idle, charged to the booker
)

// Record is one row of the ledger: the GPU time of one attempt (or hold,
// or idle booking occurrence) on one node. (Kind, ID, Attempt, Node) is
// its identity: a record written twice is counted once.
type Record struct {
	Kind     string    `json:"kind"`
	ID       string    `json:"id"`      // job id, hold id or booking name
	Attempt  int       `json:"attempt"` // the job's retry count; 0 for holds; the occurrence for bookings
	User     string    `json:"user"`
	Project  string    `json:"project"`
	GPUModel string    `json:"gpu_model"`
	Node     string    `json:"node"`
	GPUs     int       `json:"gpus"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// GPUSeconds is GPUs x (End - Start) in seconds: what was allocated.
	GPUSeconds float64 `json:"gpu_seconds"`
	// UsedGPUSeconds integrates the GPUs' utilization readings over the
	// attempt (utilization/100 x seconds, summed over its GPUs): what was
	// used. Zero when no readings came.
	UsedGPUSeconds float64 `json:"used_gpu_seconds"`
	// Ended is how the attempt ended: the reason of the job's transition
	// (exited, exit_code, canceled, preempted, lost, node_lost,
	// time_limit, ...); "released" or "expired" for holds.
	Ended string `json:"ended"`
}

// Valid reports what is wrong with the record, naming the field.
func (r Record) Valid() error {
	switch {
	case r.Kind != KindJob && r.Kind != KindInteractive && r.Kind != KindHold && r.Kind != KindBookingIdle:
		return fmt.Errorf("kind: %q is not job, interactive, hold or booking_idle", r.Kind)
	case r.ID == "":
		return fmt.Errorf("id: empty")
	case r.End.Before(r.Start):
		return fmt.Errorf("end: %s is before start %s", r.End, r.Start)
	case r.GPUSeconds < 0 || math.IsNaN(r.GPUSeconds) || math.IsInf(r.GPUSeconds, 0):
		return fmt.Errorf("gpu_seconds: %v is not a non-negative number", r.GPUSeconds)
	}
	return nil
}

// Clip returns the share of the record's GPU-seconds (allocated, used)
// that falls in [since, until); a zero bound is open. A record with no
// duration counts whole when its start is in the window.
func (r Record) Clip(since, until time.Time) (gpuSeconds, used float64) {
	start, end := r.Start, r.End
	if !since.IsZero() && start.Before(since) {
		start = since
	}
	if !until.IsZero() && end.After(until) {
		end = until
	}
	total := r.End.Sub(r.Start)
	if total <= 0 {
		in := (since.IsZero() || !r.Start.Before(since)) && (until.IsZero() || r.Start.Before(until))
		if in {
			return r.GPUSeconds, r.UsedGPUSeconds
		}
		return 0, 0
	}
	if !end.After(start) {
		return 0, 0
	}
	f := float64(end.Sub(start)) / float64(total)
	return r.GPUSeconds * f, r.UsedGPUSeconds * f
}

// Group keys of a report.
const (
	ByUser    = "user"
	ByProject = "project"
	ByGPUType = "gpu-type"
	ByNode    = "node"
	ByWeek    = "week" // the Monday (UTC) of each ISO week
)

// ByValues lists the accepted groupings, for help and errors.
var ByValues = []string{ByUser, ByProject, ByGPUType, ByNode, ByWeek}

// ValidBy reports whether by is a grouping.
func ValidBy(by string) bool { return slices.Contains(ByValues, by) }

// Row is one group of a report.
type Row struct {
	Key            string  `json:"key"`
	Records        int     `json:"records"` // attempts (and holds, bookings) that count in it
	GPUSeconds     float64 `json:"gpu_seconds"`
	GPUHours       float64 `json:"gpu_hours"`
	UsedGPUSeconds float64 `json:"used_gpu_seconds"`
	UsedGPUHours   float64 `json:"used_gpu_hours"`
	// Efficiency is used over allocated (0 to 1); 0 with nothing allocated.
	Efficiency float64 `json:"efficiency"`
	// Cost is in dollars, at each GPU model's price (models with no price
	// cost nothing).
	Cost float64 `json:"cost"`
}

// Report is GET /usage.
type Report struct {
	By    string    `json:"by"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	Rows  []Row     `json:"rows"`
	Total Row       `json:"total"`
}

// key is the record's group under by.
func key(r Record, by string) string {
	switch by {
	case ByProject:
		return r.Project
	case ByGPUType:
		return r.GPUModel
	case ByNode:
		return r.Node
	case ByWeek:
		return WeekOf(r.Start).Format("2006-01-02")
	default:
		return r.User
	}
}

// WeekOf is the start (Monday 00:00 UTC) of t's ISO week.
func WeekOf(t time.Time) time.Time {
	t = t.UTC()
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	wd := (int(d.Weekday()) + 6) % 7 // Monday 0
	return d.AddDate(0, 0, -wd)
}

// Aggregate sums records by the grouping over [since, until) (zero
// bounds: open), clipping records that straddle a bound, and prices them.
// By week, a record is split at week boundaries. Rows are ordered by
// GPU-seconds, largest first, then key; a record with nothing in the
// window is left out.
func Aggregate(recs []Record, by string, since, until time.Time, prices Prices) Report {
	rep := Report{By: by, Since: since, Until: until, Rows: []Row{}}
	rows := map[string]*Row{}
	add := func(r Record, s, u time.Time) {
		gs, used := r.Clip(s, u)
		if gs == 0 && used == 0 {
			return
		}
		k := key(r, by)
		if by == ByWeek {
			k = WeekOf(maxTime(r.Start, s)).Format("2006-01-02")
		}
		row := rows[k]
		if row == nil {
			row = &Row{Key: k}
			rows[k] = row
		}
		row.Records++
		row.GPUSeconds += gs
		row.UsedGPUSeconds += used
		if p, ok := prices.For(r.GPUModel); ok {
			row.Cost += gs / 3600 * p
		}
	}
	for _, r := range recs {
		if by != ByWeek {
			add(r, since, until)
			continue
		}
		for w := WeekOf(maxTime(r.Start, since)); w.Before(r.End) || w.Equal(WeekOf(r.Start)); w = w.AddDate(0, 0, 7) {
			s, u := maxTime(w, since), w.AddDate(0, 0, 7)
			if !until.IsZero() && until.Before(u) {
				u = until
			}
			if !u.After(s) {
				break
			}
			add(r, s, u)
			if !until.IsZero() && !u.Before(until) {
				break
			}
		}
	}
	for _, row := range rows {
		row.finish()
		rep.Rows = append(rep.Rows, *row)
		rep.Total.Records += row.Records
		rep.Total.GPUSeconds += row.GPUSeconds
		rep.Total.UsedGPUSeconds += row.UsedGPUSeconds
		rep.Total.Cost += row.Cost
	}
	rep.Total.Key = "total"
	rep.Total.finish()
	slices.SortFunc(rep.Rows, func(a, b Row) int {
		if by == ByWeek {
			return strings.Compare(a.Key, b.Key)
		}
		if a.GPUSeconds != b.GPUSeconds {
			if a.GPUSeconds > b.GPUSeconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	return rep
}

func (r *Row) finish() {
	r.GPUHours = r.GPUSeconds / 3600
	r.UsedGPUHours = r.UsedGPUSeconds / 3600
	if r.GPUSeconds > 0 {
		r.Efficiency = min(r.UsedGPUSeconds/r.GPUSeconds, 1)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ParseTime reads a report bound: a date (2026-11-01, midnight in loc) or
// RFC 3339. Empty: the zero time (open).
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a date (2026-11-01) nor RFC 3339 (2026-11-01T09:00:00Z)", s)
	}
	return t.UTC(), nil
}
