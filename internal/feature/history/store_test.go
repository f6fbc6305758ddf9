package history

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store/memstore"
)

// TestSamplesOutliveARestart: the samples Add stores are what Load reads
// back into a new Books (a restarted server draws the same graphs), and
// those older than the retention are neither kept by the store nor
// loaded.
func TestSamplesOutliveARestart(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	var before Books
	cs := api.ClusterStatus{TotalGPUs: 8, AllocatedGPUs: 2}
	now := base
	for i := range 10 {
		now = base.Add(time.Duration(i) * Interval)
		if err := before.Add(ctx, st, now, cs, i, 1, Counts{Started: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var after Books
	if err := after.Load(ctx, st, now); err != nil {
		t.Fatal(err)
	}
	q := Query{Since: base, Points: 1000}
	want, got := before.History(q, now), after.History(q, now)
	if len(got.Points) != 10 || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a restart: %d points %+v\nwant %d points %+v", len(got.Points), got, len(want.Points), want)
	}

	// A sample past the retention drops those before it, in the store.
	later := now.Add(Retention + Interval)
	if err := before.Add(ctx, st, later, cs, 0, 0, Counts{}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.History(ctx, time.Time{})
	if err != nil || len(rows) != 1 || !rows[0].At.Equal(later) {
		t.Fatalf("stored samples after the retention = %d, %v: want the last one only", len(rows), err)
	}
}
