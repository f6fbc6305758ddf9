package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// DefaultsStore is where users' own notification defaults are kept
// (store.Store).
type DefaultsStore interface {
	PutNotifyDefault(ctx context.Context, d store.NotifyDefaultRecord) error
	DeleteNotifyDefault(ctx context.Context, user string) error
	NotifyDefaults(ctx context.Context) ([]store.NotifyDefaultRecord, error)
}

// userDefaults is a user's own defaults as stored (JSON) and kept in
// memory.
type userDefaults struct {
	Notify    string    `json:"notify"` // normalized (api.ParseNotify), never ""
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by"`
}

// loadDefaults reads every user's defaults from the store.
func (r *Registry) loadDefaults(ctx context.Context) error {
	recs, err := r.st.NotifyDefaults(ctx)
	if err != nil {
		return fmt.Errorf("notify defaults: %w", err)
	}
	r.defaults = make(map[string]userDefaults, len(recs))
	for _, rec := range recs {
		var d userDefaults
		if err := json.Unmarshal([]byte(rec.Data), &d); err != nil {
			return fmt.Errorf("notify defaults of %s: %w", rec.User, err)
		}
		if n, err := api.ParseNotify(d.Notify); err != nil || n == "" {
			return fmt.Errorf("notify defaults of %s: %q is not a notify value", rec.User, d.Notify)
		}
		r.defaults[rec.User] = d
	}
	return nil
}

// Defaults returns user's own defaults; Builtin when they have set none.
func (r *Registry) Defaults(user string) api.NotifyDefaults {
	r.mu.RLock()
	d, ok := r.defaults[user]
	r.mu.RUnlock()
	if !ok {
		return api.NotifyDefaults{User: user, Builtin: true}
	}
	at := d.UpdatedAt
	return api.NotifyDefaults{User: user, Notify: d.Notify, UpdatedAt: &at, UpdatedBy: d.UpdatedBy}
}

// SetDefaults checks notify (the grammar of a job's notify field, or
// api.NotifyDefault to go back to the built-in defaults), stores it as
// user's own defaults, and returns them once that is durable; from then
// on the Planner applies them to the events of every job of user's with
// no notify field, those already queued or running included. A bad value
// is a 422 naming notify and changes nothing. The caller has checked that
// by may set user's defaults.
func (r *Registry) SetDefaults(ctx context.Context, user, notify, by string) (api.NotifyDefaults, error) {
	reset := strings.EqualFold(strings.TrimSpace(notify), api.NotifyDefault)
	n := ""
	if !reset {
		var err error
		if n, err = api.ParseNotify(notify); err != nil {
			return api.NotifyDefaults{}, api.Invalid("notify", "%s (or default, for the built-in defaults)", err.Error())
		}
		if n == "" {
			return api.NotifyDefaults{}, api.Invalid("notify", "is required: a comma-separated list of begin, end, fail and preempt, or all, or none, or default for the built-in defaults")
		}
	}
	r.changing.Lock()
	defer r.changing.Unlock()
	if reset {
		if err := r.st.DeleteNotifyDefault(ctx, user); err != nil {
			return api.NotifyDefaults{}, &api.Error{Status: 503, Code: "store_unavailable", Message: err.Error()}
		}
		r.mu.Lock()
		delete(r.defaults, user)
		r.mu.Unlock()
		return r.Defaults(user), nil
	}
	d := userDefaults{Notify: n, UpdatedAt: r.now().UTC(), UpdatedBy: by}
	data, err := json.Marshal(d)
	if err != nil {
		return api.NotifyDefaults{}, err
	}
	if err := r.st.PutNotifyDefault(ctx, store.NotifyDefaultRecord{User: user, Data: string(data)}); err != nil {
		return api.NotifyDefaults{}, &api.Error{Status: 503, Code: "store_unavailable", Message: err.Error()}
	}
	r.mu.Lock()
	r.defaults[user] = d
	r.mu.Unlock()
	return r.Defaults(user), nil
}

// effective returns the notify value a job (or array) of user whose own
// notify field is notify goes by: its own when it has one, else its
// user's defaults, else "" (the built-in defaults, see Wants). A map
// lookup under the read lock: the Planner calls it in the orchestrator's
// commit.
func (r *Registry) effective(user, notify string) string {
	if notify != "" {
		return notify
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.defaults[user].Notify
}
