package bookings

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// benchBookings fills books with n one-GPU bookings on 16 8-GPU nodes, a
// day apart per GPU, every repeat-th one daily (0: none).
func benchBookings(n, repeat int) *Books {
	c := newCluster()
	for i := range 16 {
		c.nodes.Add(node(fmt.Sprintf("n%02d", i), "H100", 8))
	}
	now := time.Now()
	b := newBooks(c, &now, Config{})
	base := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range n {
		g := i % 128
		s := base.Add(time.Duration(i/128) * 24 * time.Hour)
		r := &api.Reservation{Name: fmt.Sprintf("b%05d", i), GPUs: 1, Start: s, End: s.Add(2 * time.Hour), State: api.BookingScheduled,
			Allocation: []api.Allocation{{NodeID: fmt.Sprintf("n%02d", g/8), GPUID: g % 8}}}
		if repeat > 0 && i%repeat == 0 {
			r.Flags = []string{api.BookingDaily}
		}
		b.Add(r)
	}
	return b
}

// BenchmarkReservationList is the cycle's read of the bookings, with and
// without repeating ones to expand.
func BenchmarkReservationList(b *testing.B) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		n, repeat int
	}{{"none", 0, 0}, {"1000-once", 1000, 0}, {"1000-tenth-daily", 1000, 10}} {
		books := benchBookings(c.n, c.repeat)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				books.list(now)
			}
		})
	}
}

// BenchmarkAllocateBooking is the GPU choice (overlap checks included) of
// an 8-GPU booking among n bookings on 128 GPUs.
func BenchmarkAllocateBooking(b *testing.B) {
	for _, c := range []struct {
		name      string
		n, repeat int
	}{{"none", 0, 0}, {"1000-once", 1000, 0}, {"1000-tenth-daily", 1000, 10}} {
		books := benchBookings(c.n, c.repeat)
		s := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) // between the bookings of that day and the next
		r := &api.Reservation{Name: "new", GPUs: 8, Start: s, End: s.Add(4 * time.Hour)}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := books.allocate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
