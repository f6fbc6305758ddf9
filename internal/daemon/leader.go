package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/store/lease"
)

// leaseTTL is the leader lease's TTL on PostgreSQL: a follower takes the
// lease at most this long after the leader died (it waits for the lease's
// expiry, not a polling period), then loads the state. The leader renews
// every TTL/3 and stops trusting its lease 2/3 of the TTL after its last
// renewal began. 7 s keeps a fail-over, load included, under the 10 s
// target (docs/store.md, "Measuring fail-over").
const leaseTTL = 7 * time.Second

// leaseHolder is this server's name in the leader lease: the host and the
// data dir.
func leaseHolder(dataDir string) string {
	host, _ := os.Hostname()
	return host + ":" + dataDir
}

// leadOnPostgres makes a server on PostgreSQL the leader before it loads
// the state: it waits (a standby, logging so) until it holds the leader
// lease, fences its store's writes with the lease's epoch, and renews the
// lease in the background. The returned context ends when the lease is
// lost (the server then stops: a fenced write failed, or a renewal did not
// succeed in time); stop gives the lease up. On SQLite (one server per
// data dir, locked) it does nothing.
//
// The holder's name is the host and the data dir: the same server started
// again (the data dir's lock proves the old process gone) takes its lease
// back at once, with a new epoch.
func leadOnPostgres(ctx context.Context, st *store.Store, dataDir string, logger *slog.Logger) (context.Context, func(), error) {
	if !st.Postgres() {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	el := lease.New(lease.Config{
		Backend: st, Holder: leaseHolder(dataDir), TTL: leaseTTL, Logger: logger,
		OnDeposed: func(epoch int64) {
			if ctx.Err() == nil {
				logger.Error("leader lease lost: this server stops", "epoch", epoch)
			}
			cancel()
		},
	})
	waited := false
	for {
		el.Step(ctx)
		if epoch, ok := el.Leading(); ok {
			st.Fence(epoch, el.Deposed)
			logger.Info("leading", "epoch", epoch)
			break
		}
		if !waited {
			logger.Info("standby: another server holds the leader lease; waiting for it", "ttl", leaseTTL)
			waited = true
		}
		select {
		case <-ctx.Done():
			cancel()
			return nil, nil, fmt.Errorf("waiting for the leader lease: %w", ctx.Err())
		case <-time.After(untilExpiry(ctx, st)):
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		el.Run(ctx)
	}()
	return ctx, func() { cancel(); <-done }, nil
}

// untilExpiry is how long a follower waits before its next try for the
// lease: until the holder's lease expires (a dead leader's lease is taken
// as soon as it can be), at most TTL/3 (a live leader renews it by then).
func untilExpiry(ctx context.Context, st *store.Store) time.Duration {
	now := time.Now()
	l, err := st.Leader(ctx, now)
	if err != nil || l.Holder == "" {
		return min(100*time.Millisecond, leaseTTL/3)
	}
	return min(max(l.Expires.Sub(now)+20*time.Millisecond, 20*time.Millisecond), leaseTTL/3)
}
