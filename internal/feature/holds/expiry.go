package holds

import (
	"log/slog"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Releaser frees a hold's GPUs in tx, which only the loop can do: the
// GPUs are the shared books', and the hold's GPU time is charged to the
// fair-share ledger and the usage ledger (Books.Ended is its part here).
type Releaser interface {
	ReleaseHold(tx feature.Tx, h *api.Hold)
}

// Expiry ends every hold past its expiry, each tick, in a transaction of
// the loop's (feature.TxTicker): its GPUs are released.
type Expiry struct {
	Books   *Books
	Release Releaser
	Now     func() time.Time // the orchestrator's clock, read at each tick
	Log     *slog.Logger
}

// TickTx releases the holds due at Now; it reports whether there were
// any.
func (e Expiry) TickTx(tx feature.Tx) bool {
	due := e.Books.Due(e.Now())
	for _, h := range due {
		e.Release.ReleaseHold(tx, h)
		e.Log.Info("hold expired; GPUs released", "hold", h.JobID, "user", h.User)
	}
	return len(due) > 0
}

// TickName names the holds' tick in the log.
func (e Expiry) TickName() string { return "hold expiry" }
