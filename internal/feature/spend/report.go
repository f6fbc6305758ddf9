package spend

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// Query is what GET /usage asks.
type Query struct {
	By           string    // usage.ByUser (default), ByProject, ByGPUType, ByNode, ByWeek
	Since, Until time.Time // zero: open
	User         string    // non-empty: only this user's records (a user's own view)
}

// Report reports the stored ledger over q's window, grouped and priced at
// prices() (today's: called once the records are read). It reads the
// store, not the books. Bad input is an *api.Error naming the field.
func Report(ctx context.Context, st Ledger, q Query, prices func() usage.Prices) (usage.Report, error) {
	if q.By == "" {
		q.By = usage.ByUser
	}
	if !usage.ValidBy(q.By) {
		return usage.Report{}, api.Invalid("by", "%q is not one of %v", q.By, usage.ByValues)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return usage.Report{}, api.Invalid("until", "%s is not after since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	recs, err := st.UsageRecords(ctx, q.Since, q.Until)
	if err != nil {
		return usage.Report{}, err
	}
	if q.User != "" {
		mine := recs[:0]
		for _, r := range recs {
			if r.User == q.User {
				mine = append(mine, r)
			}
		}
		recs = mine
	}
	return usage.Aggregate(recs, q.By, q.Since, q.Until, prices()), nil
}

// Total is one user's and project's all-time charge, for metrics.
type Total struct {
	User, Project string
	GPUSeconds    float64
	Dollars       float64
}

// Totals returns the all-time totals per user and project, in no order.
// Read lock held.
func (b *Books) Totals() []Total {
	out := make([]Total, 0, len(b.totals))
	for k, s := range b.totals {
		out = append(out, Total{User: k.user, Project: k.project, GPUSeconds: s.GPUSeconds, Dollars: s.Dollars})
	}
	return out
}
