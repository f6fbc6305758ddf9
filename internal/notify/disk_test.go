package notify

import (
	"context"
	"errors"
	"testing"
)

// TestDiskWatcher: the alert is raised when the free space falls under the
// threshold, once, again only after it had room; a failed raise is tried
// at the next check.
func TestDiskWatcher(t *testing.T) {
	free := 50.0
	var raised []Event
	fail := false
	w := &DiskWatcher{Path: "/data", MinFree: 5, Free: func(string) (float64, error) { return free, nil },
		Raise: func(_ context.Context, ev Event) error {
			if fail {
				return errors.New("store down")
			}
			raised = append(raised, ev)
			return nil
		}}
	steps := []struct {
		free float64
		fail bool
		want int
	}{{50, false, 0}, {4, true, 0}, {4, false, 1}, {3, false, 1}, {20, false, 1}, {2, false, 2}}
	for i, s := range steps {
		free, fail = s.free, s.fail
		w.Check(context.Background())
		if len(raised) != s.want {
			t.Fatalf("step %d (%.0f%% free): %d alerts, want %d", i, s.free, len(raised), s.want)
		}
	}
	if raised[0].Kind != AlertDiskFull || raised[0].Alert == nil {
		t.Errorf("alert %+v", raised[0])
	}
}
