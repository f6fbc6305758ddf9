package bookings

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/featuretest"
)

// TestOps follows the bookings' operations through a fake loop: a
// request that fails its own checks is refused before the loop is
// asked, naming its field (one that conflicts with the books, in it); a
// change is one Do whose batch holds the booking; the reads see it,
// under the read lock.
func TestOps(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	b := newBooks(newCluster(node("n1", "H100", 8)), &now, Config{Allowance: 64})
	l := &featuretest.Loop{Now: now}
	o := Ops{Books: b, Loop: l}
	admin := Booker{User: "root", Admin: true}
	create := func(name string, from, to time.Duration) func() error {
		return func() error { _, err := o.Create(ctx, req(name, 1, base, from, to), admin); return err }
	}
	cases := []struct {
		name   string
		op     func() error
		status int
		field  string
		dos    int // the loop's ops so far
	}{
		{"bad name", create("no spaces", 9*time.Hour, 10*time.Hour), 422, "name", 0},
		{"end before start", create("x", 10*time.Hour, 9*time.Hour), 422, "end", 1}, // checked against the books, in the loop
		{"created", create("vision", 9*time.Hour, 10*time.Hour), 0, "", 2},
		{"read", func() error {
			if r, err := o.Get("vision"); err != nil || r.Name != "vision" || len(o.List()) != 1 {
				return fmt.Errorf("read back %+v, %w; list %+v", r, err, o.List())
			}
			return nil
		}, 0, "", 2},
		{"taken", create("vision", 11*time.Hour, 12*time.Hour), 409, "", 3},
		{"deleted", func() error { _, err := o.Delete(ctx, "vision", admin); return err }, 0, "", 4},
		{"deleted unknown", func() error { _, err := o.Delete(ctx, "nope", admin); return err }, 404, "", 5},
	}
	for _, c := range cases {
		err := c.op()
		var ae *api.Error
		if c.status == 0 && err != nil || c.status != 0 && (!errors.As(err, &ae) || ae.Status != c.status || ae.Field != c.field) {
			t.Fatalf("%s: error %v, want status %d field %q", c.name, err, c.status, c.field)
		}
		if l.Dos != c.dos {
			t.Fatalf("%s: the loop was asked %d times, want %d", c.name, l.Dos, c.dos)
		}
	}
	if len(l.Txs) != 2 || len(l.Txs[0].B.Bookings) != 1 || l.Reads != 2 {
		t.Fatalf("committed %d transactions (the first with %+v), %d reads", len(l.Txs), l.Txs[0].B.Bookings, l.Reads)
	}
	if _, err := o.Get("vision"); err == nil {
		t.Fatal("a deleted booking was found")
	}
}
