package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/corral-sched/corral/internal/api"
)

// Errors a retry cannot fix. A commit fails either for a
// reason of the moment (a full disk, an I/O error, a busy or lost
// database: the orchestrator writes the batch again until it succeeds)
// or because of what the batch holds (a row the store cannot encode, a
// constraint, a value too big): written again, it fails again. Permanent
// tells them apart; Batch.Unstorable finds the rows at fault, so that the
// rest of the batch can be written without them (docs/limits.md).

// ErrUnstorable wraps the error of a row the store cannot write, whatever
// it retries: a time outside what it can encode, text PostgreSQL refuses.
var ErrUnstorable = errors.New("the store cannot write this row")

// SQLite's primary result codes for a batch that cannot be written as it
// is (sqlite3.h).
const (
	sqliteTooBig     = 18
	sqliteConstraint = 19
	sqliteMismatch   = 20
	sqliteRange      = 25
)

// Permanent reports whether err, from Commit, is one that writing the
// same batch again cannot fix.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnstorable) {
		return true
	}
	var me *json.MarshalerError
	var uv *json.UnsupportedValueError
	var ut *json.UnsupportedTypeError
	if errors.As(err, &me) || errors.As(err, &uv) || errors.As(err, &ut) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteTooBig, sqliteConstraint, sqliteMismatch, sqliteRange:
			return true
		}
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 22: data exception (bad encoding, value out of range); 23:
		// integrity constraint; 54: program limit exceeded (too big).
		c := pe.Code
		return strings.HasPrefix(c, "22") || strings.HasPrefix(c, "23") || strings.HasPrefix(c, "54")
	}
	return false
}

// Years the store's nanosecond columns can hold (int64 nanoseconds since
// 1970: 1677-09-21 to 2262-04-11); a zero time is written as 0.
var (
	minNanos = time.Unix(0, -1<<63)
	maxNanos = time.Unix(0, 1<<63-1)
)

// checkNanos refuses a time a nanosecond column cannot hold.
func checkNanos(what string, ts ...time.Time) error {
	for _, t := range ts {
		if !t.IsZero() && (t.Before(minNanos) || t.After(maxNanos)) {
			return fmt.Errorf("%w: %s: time %s is outside the years the store can write", ErrUnstorable, what, t.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// checkJobTimes refuses a job whose times its row cannot hold.
func checkJobTimes(j *api.Job) error {
	ts := []time.Time{j.SubmittedAt}
	if j.StartedAt != nil {
		ts = append(ts, *j.StartedAt)
	}
	if j.FinishedAt != nil {
		ts = append(ts, *j.FinishedAt)
	}
	return checkNanos("job "+j.ID, ts...)
}

// checkText refuses text that PostgreSQL cannot store in a text column
// (a NUL byte, invalid UTF-8). SQLite stores it: Unstorable checks it on
// either, to find the rows at fault after PostgreSQL refused a batch.
func checkText(what string, ss ...string) error {
	for _, s := range ss {
		if strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
			return fmt.Errorf("%w: %s: text with a NUL byte or invalid UTF-8", ErrUnstorable, what)
		}
	}
	return nil
}

// checkJSON refuses a value that does not encode (a time past year 9999).
func checkJSON(what string, v any) error {
	if _, err := json.Marshal(v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnstorable, what, err)
	}
	return nil
}

// Part names one list of a Batch.
type Part int

// The parts of a Batch whose rows Unstorable checks.
const (
	PartJobs Part = iota
	PartEvents
	PartHolds
	PartAudit
	PartOutbox
	PartArrays
	PartBookings
	PartUsage
	PartEnded
	PartRuns
	numParts
)

var partNames = [numParts]string{"jobs", "events", "holds", "audit", "outbox", "arrays", "reservations", "usage", "ended", "runs"}

func (p Part) String() string { return partNames[p] }

// Lens is how many rows a batch has in each part: taken after each
// change a batch collects, it tells which change added which rows.
type Lens [numParts]int

// Lens returns the batch's row counts by part.
func (b *Batch) Lens() Lens {
	return Lens{len(b.Jobs), len(b.Events), len(b.Holds), len(b.Audit), len(b.Outbox), len(b.Arrays),
		len(b.Bookings), len(b.Usage), len(b.Ended), len(b.Runs)}
}

// BadRow is a row of a batch that the store cannot write.
type BadRow struct {
	Part  Part
	Index int    // in the part's list
	Key   string // the row's id: a job id, a hold id, a booking name...
	Err   error  // wraps ErrUnstorable
}

// Unstorable returns the rows of b the store cannot write, whatever it
// retries. It encodes every row: call it after Commit failed with a
// Permanent error, not before every commit.
func (b *Batch) Unstorable() []BadRow {
	var bad []BadRow
	add := func(p Part, i int, key string, err error) {
		if err != nil {
			bad = append(bad, BadRow{p, i, key, err})
		}
	}
	for i := range b.Jobs {
		j := b.Jobs[i]
		j.Events = nil
		err := checkJobTimes(&j)
		if err == nil {
			err = checkText("job "+j.ID, j.ID, string(j.State), j.User, j.Project, j.Name, j.ArrayJobID)
		}
		if err == nil {
			err = checkJSON("job "+j.ID, j)
		}
		add(PartJobs, i, j.ID, err)
	}
	for i, e := range b.Events {
		err := checkText("event of "+e.JobID, e.JobID)
		if err == nil {
			err = checkJSON("event of "+e.JobID, e.Event)
		}
		add(PartEvents, i, e.JobID, err)
	}
	for i, h := range b.Holds {
		err := checkText("hold "+h.JobID, h.JobID)
		if err == nil {
			err = checkJSON("hold "+h.JobID, h)
		}
		add(PartHolds, i, h.JobID, err)
	}
	for i, a := range b.Audit {
		err := checkText("audit entry", a.User, a.Action)
		if err == nil {
			err = checkJSON("audit entry", a)
		}
		if err == nil && !api.TimeInBounds(a.At) {
			err = fmt.Errorf("%w: audit entry: time %s is outside the years the store can write", ErrUnstorable, a.At.UTC().Format(time.RFC3339))
		}
		add(PartAudit, i, a.Action, err)
	}
	for i, it := range b.Outbox {
		add(PartOutbox, i, it.Kind, checkText("outbox row", it.EndpointID, it.Kind, it.LastError, it.Data))
	}
	for i, r := range b.Arrays {
		r.Template.Events = nil
		err := checkNanos("array "+r.Array.ID, r.Finished)
		if err == nil {
			err = checkText("array "+r.Array.ID, r.Array.ID)
		}
		if err == nil {
			err = checkJSON("array "+r.Array.ID, r)
		}
		add(PartArrays, i, r.Array.ID, err)
	}
	for i, r := range b.Bookings {
		err := checkText("booking "+r.Name, r.Name)
		if err == nil {
			err = checkJSON("booking "+r.Name, r)
		}
		add(PartBookings, i, r.Name, err)
	}
	for i, r := range b.Usage {
		err := checkNanos("usage of "+r.ID, r.Start, r.End)
		if err == nil {
			err = checkText("usage of "+r.ID, r.Kind, r.ID, r.Node, r.User, r.Project, r.GPUModel)
		}
		add(PartUsage, i, r.ID, err)
	}
	for i, e := range b.Ended {
		err := checkNanos("ended job", e.FinishedAt)
		if err == nil {
			err = checkText("ended job", e.User, e.Project)
		}
		add(PartEnded, i, e.User, err)
	}
	for i, r := range b.Runs {
		add(PartRuns, i, r.JobID, checkRun(r))
	}
	return bad
}

// Drop removes the rows named by bad (from Unstorable) from b.
func (b *Batch) Drop(bad []BadRow) {
	drop := map[Part]map[int]bool{}
	for _, r := range bad {
		if drop[r.Part] == nil {
			drop[r.Part] = map[int]bool{}
		}
		drop[r.Part][r.Index] = true
	}
	b.Jobs = without(b.Jobs, drop[PartJobs])
	b.Events = without(b.Events, drop[PartEvents])
	b.Holds = without(b.Holds, drop[PartHolds])
	b.Audit = without(b.Audit, drop[PartAudit])
	b.Outbox = without(b.Outbox, drop[PartOutbox])
	b.Arrays = without(b.Arrays, drop[PartArrays])
	b.Bookings = without(b.Bookings, drop[PartBookings])
	b.Usage = without(b.Usage, drop[PartUsage])
	b.Ended = without(b.Ended, drop[PartEnded])
	b.Runs = without(b.Runs, drop[PartRuns])
}

// without returns xs less the indexes in drop (xs itself when none).
func without[T any](xs []T, drop map[int]bool) []T {
	if len(drop) == 0 {
		return xs
	}
	out := make([]T, 0, len(xs))
	for i, x := range xs {
		if !drop[i] {
			out = append(out, x)
		}
	}
	return out
}
