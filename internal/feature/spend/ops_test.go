package spend

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/featuretest"
	"github.com/corral-sched/corral/internal/store/memstore"
	"github.com/corral-sched/corral/internal/usage"
)

// TestOps follows each of the API's operations through a fake loop over
// a memstore: a bad request is refused before the loop is asked (Dos
// stays 0) naming its field; a change is committed in one Do and its
// setting is in the store; a read takes the read lock; a store that is
// down changes nothing.
func TestOps(t *testing.T) {
	ctx := context.Background()
	bg := usage.Budget{Kind: usage.BudgetUser, Name: "ana", Dollars: 100}
	cases := []struct {
		name    string
		op      func(o Ops) error
		field   string // the field a 422 names; "" when none
		status  int    // the api.Error's status; 0: no error
		dos     int
		setting string // a setting the store holds after
	}{
		{"bad budget", func(o Ops) error { _, err := o.SetBudget(ctx, usage.Budget{Kind: "team", Name: "x"}); return err }, "kind", 422, 0, ""},
		{"budget", func(o Ops) error { _, err := o.SetBudget(ctx, bg); return err }, "", 0, 1, settingBudgets},
		{"unset missing budget", func(o Ops) error { return o.UnsetBudget(ctx, "user", "bo") }, "", 404, 1, ""},
		{"release missing budget", func(o Ops) error { _, err := o.ReleaseBudget(ctx, "user", "bo"); return err }, "", 404, 1, ""},
		{"bad price", func(o Ops) error { _, err := o.SetPrice(ctx, "H100", -1); return err }, "dollars_per_hour", 422, 0, ""},
		{"bad model", func(o Ops) error { _, err := o.SetPrice(ctx, "", 2); return err }, "model", 422, 0, ""},
		{"price", func(o Ops) error { _, err := o.SetPrice(ctx, "H100", 2.5); return err }, "", 0, 1, settingPrices},
		{"unset missing price", func(o Ops) error { _, err := o.UnsetPrice(ctx, "A100"); return err }, "", 404, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _, _ := books(t, nil, nil)
			st := memstore.New()
			l := &featuretest.Loop{Now: t0, Store: st}
			err := c.op(Ops{Books: b, Loop: l})
			var ae *api.Error
			switch {
			case c.status == 0 && err != nil:
				t.Fatalf("error: %v", err)
			case c.status != 0 && (!errors.As(err, &ae) || ae.Status != c.status):
				t.Fatalf("error %v, want status %d", err, c.status)
			case c.field != "" && ae.Field != c.field:
				t.Fatalf("error names %q, want %q", ae.Field, c.field)
			}
			if l.Dos != c.dos {
				t.Fatalf("loop asked %d times, want %d", l.Dos, c.dos)
			}
			state, err := st.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := state.Settings[c.setting]; c.setting != "" && !ok {
				t.Fatalf("setting %s not stored: %v", c.setting, state.Settings)
			}
		})
	}
}

// TestOpsReads: the reads see what the changes made, under the read
// lock, and a store that is down changes nothing.
func TestOpsReads(t *testing.T) {
	ctx := context.Background()
	b, _, _ := books(t, nil, nil)
	l := &featuretest.Loop{Now: t0, Store: memstore.New()}
	o := Ops{Books: b, Loop: l}
	if _, err := o.SetPrice(ctx, "H100", 2.5); err != nil {
		t.Fatal(err)
	}
	if p := o.Prices(); p["H100"] != 2.5 {
		t.Fatalf("prices %v", p)
	}
	if _, err := o.SetBudget(ctx, usage.Budget{Kind: usage.BudgetUser, Name: "ana", Dollars: 100}); err != nil {
		t.Fatal(err)
	}
	if bs := o.Budgets(); len(bs) != 1 || bs[0].Budget.Name != "ana" {
		t.Fatalf("budgets %+v", bs)
	}
	if l.Reads != 2 {
		t.Fatalf("reads under the lock: %d, want 2", l.Reads)
	}
	l.Fail = errors.New("store down")
	if _, err := o.SetPrice(ctx, "H100", 9); err == nil {
		t.Fatal("a store that is down took a price")
	}
	if p := o.Prices(); p["H100"] != 2.5 {
		t.Fatalf("a refused change changed the prices: %v", p)
	}
	if err := o.UnsetBudget(ctx, "user", "ana"); err == nil {
		t.Fatal("a store that is down removed a budget")
	}
	if len(o.Budgets()) != 1 {
		t.Fatal("a refused change removed the budget")
	}
}
