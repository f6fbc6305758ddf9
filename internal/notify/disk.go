package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/diskfree"
)

// DiskWatcher raises alert.disk_full when the file system of the server's
// data dir (the database and the job logs) has less than MinFree percent
// free, once per episode: again only after it had room.
type DiskWatcher struct {
	Path    string
	MinFree float64 // percent; <= 0: off
	Raise   func(ctx context.Context, ev Event) error
	Free    func(path string) (float64, error) // nil: diskfree.Percent
	Now     func() time.Time                   // nil: time.Now
	Logger  *slog.Logger

	full bool
}

// Check reads the free space once and raises the alert when it has just
// fallen under MinFree. Not safe for concurrent use.
func (w *DiskWatcher) Check(ctx context.Context) {
	if w.MinFree <= 0 {
		return
	}
	free := w.Free
	if free == nil {
		free = diskfree.Percent
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	pct, err := free(w.Path)
	if err != nil {
		if w.Logger != nil {
			w.Logger.Warn("cannot tell the data disk's free space", "err", err)
		}
		return
	}
	switch {
	case pct >= w.MinFree:
		w.full = false
	case !w.full:
		ev := Event{Kind: AlertDiskFull, At: now().UTC(), Alert: &Alert{
			Message: fmt.Sprintf("the server's data disk (%s) has %.1f%% free, under %g%%: the database and job logs may soon fail to write", w.Path, pct, w.MinFree)}}
		if err := w.Raise(ctx, ev); err != nil {
			if w.Logger != nil {
				w.Logger.Error("notify: raising the disk alert", "err", err)
			}
			return // told next time
		}
		w.full = true
	}
}

// Run checks every interval until ctx ends.
func (w *DiskWatcher) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
