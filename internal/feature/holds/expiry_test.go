package holds

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// releases records the holds the loop was asked to release, and ends
// them in the books as the loop's release does.
type releases struct {
	b   *Books
	ids []string
}

func (r *releases) ReleaseHold(tx feature.Tx, h *api.Hold) {
	r.ids = append(r.ids, h.JobID)
	if _, err := r.b.Ended(tx, h, time.Hour); err != nil {
		panic(err)
	}
}

// TestExpiryReleasesDueHolds: each tick releases the holds past their
// expiry at the tick's clock, and reports whether there were any (the
// loop then commits); a hold not yet due stays.
func TestExpiryReleasesDueHolds(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	b := New(0)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	b.Add(&api.Hold{JobID: "h1", User: "ana", HeldAt: t0, ExpiresAt: at(time.Hour)})
	b.Add(&api.Hold{JobID: "h2", User: "bo", HeldAt: t0, ExpiresAt: at(2 * time.Hour)})
	r := &releases{b: b}
	now := t0
	e := Expiry{Books: b, Release: r, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)}
	cases := []struct {
		at   time.Duration
		work bool
		ids  []string
	}{
		{30 * time.Minute, false, nil},
		{time.Hour, true, []string{"h1"}},
		{90 * time.Minute, false, []string{"h1"}},
		{3 * time.Hour, true, []string{"h1", "h2"}},
	}
	for _, c := range cases {
		now = t0.Add(c.at)
		tx := &featuretest.Tx{At: now}
		if got := e.TickTx(tx); got != c.work || !slices.Equal(r.ids, c.ids) {
			t.Fatalf("at +%s: work %v, released %v; want %v %v", c.at, got, r.ids, c.work, c.ids)
		}
		if c.work && len(tx.B.DeleteHolds) == 0 {
			t.Fatalf("at +%s: a release wrote no row", c.at)
		}
	}
	if e.TickName() != "hold expiry" {
		t.Fatal(e.TickName())
	}
}
