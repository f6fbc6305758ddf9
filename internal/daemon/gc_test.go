package daemon

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
)

func TestHeapLimit(t *testing.T) {
	tests := []struct {
		live uint64
		want int64
	}{
		{0, heapFloor},
		{100 << 20, heapFloor}, // 2.5 x 100 MiB is under the floor
		{160 << 20, heapFloor}, // exactly the floor
		{200 << 20, 500 << 20}, // 100,000 queued jobs hold about this much
		{2 << 30, 5 << 30},     // a very large queue: 2.5 times it
	}
	for _, tc := range tests {
		if got := heapLimit(tc.live); got != tc.want {
			t.Errorf("heapLimit(%d MiB) = %d MiB; want %d MiB", tc.live>>20, got>>20, tc.want>>20)
		}
	}
}

// boundHeap sets the process's soft memory limit from its live heap, and
// leaves it alone when GOMEMLIMIT (or GOGC) is set.
func TestBoundHeap(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one round, then it returns

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(123 << 20)
	boundHeap(ctx, log)
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Errorf("with GOMEMLIMIT set the limit became %d MiB; want it left alone", got>>20)
	}

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	boundHeap(ctx, log)
	if got := debug.SetMemoryLimit(-1); got < heapFloor || got > heapLimit(1<<40) {
		t.Errorf("the limit is %d MiB; want at least the floor, %d MiB", got>>20, heapFloor>>20)
	}
}
