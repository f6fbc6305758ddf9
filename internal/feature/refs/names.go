package refs

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// maxNamed is how many jobs of one name a resolution lists.
const maxNamed = 10

// named returns user's jobs and arrays named name (an array once), from
// memory and the store, newest first, at most maxNamed+1. Memory is
// copied from a view; the store is read after it is closed.
func (r *Resolver) named(name, user string) ([]store.Named, error) {
	found := map[string]store.Named{}
	v := r.jobs.View()
	for j := range v.All() {
		if j.Name != name || j.User != user {
			continue
		}
		if j.ArrayJobID != "" {
			found[j.ArrayJobID] = store.Named{ID: j.ArrayJobID, Number: j.Number, Array: true}
		} else {
			found[j.ID] = store.Named{ID: j.ID, Number: j.Number}
		}
	}
	v.Done()
	stored, err := r.storedNamed(user, name, maxNamed+1)
	if err != nil {
		return nil, err
	}
	for _, n := range stored {
		if _, ok := found[n.ID]; !ok {
			found[n.ID] = n
		}
	}
	out := make([]store.Named, 0, len(found))
	for _, n := range found {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b store.Named) int { return strings.Compare(b.ID, a.ID) })
	return out[:min(len(out), maxNamed+1)], nil
}

// ambiguousName is the 409 for a name several of the caller's jobs have:
// it lists them by number (an array as NUMBER_*), newest first.
func ambiguousName(name string, named []store.Named) error {
	refs := make([]string, 0, len(named))
	for i, n := range named {
		if i == maxNamed {
			refs = append(refs, "…")
			break
		}
		ref := n.ID
		if n.Number > 0 {
			ref = strconv.FormatInt(n.Number, 10)
		}
		if n.Array {
			ref += " (an array)"
		}
		refs = append(refs, ref)
	}
	more := ""
	if len(named) > maxNamed {
		more = " or more"
	}
	return &api.Error{Status: http.StatusConflict, Code: "ambiguous_id", Field: "job_id",
		Message: fmt.Sprintf("%q names %d%s of your jobs: %s; give a number", name, min(len(named), maxNamed), more, strings.Join(refs, ", "))}
}

// maxRefs bounds Active's answer.
const maxRefs = 500

// Active lists user's unfinished jobs and arrays (an array once), newest
// first, at most maxRefs: what shell completion offers. Memory only
// (every unfinished job is there), from a view.
func (r *Resolver) Active(user string) []api.JobRef {
	v := r.jobs.View()
	byID := map[string]api.JobRef{}
	for j := range v.All() {
		if j.User != user || j.State.Terminal() {
			continue
		}
		if j.ArrayJobID == "" {
			byID[j.ID] = api.JobRef{Number: j.Number, ID: j.ID, Name: j.Name, State: j.State}
			continue
		}
		ref, seen := byID[j.ArrayJobID]
		if !seen {
			ref = api.JobRef{Number: j.Number, ID: j.ArrayJobID, Name: j.Name, State: api.StateQueued, Array: true}
		}
		if j.State.Active() {
			ref.State = api.StateRunning
		}
		byID[j.ArrayJobID] = ref
	}
	v.Done()
	out := make([]api.JobRef, 0, len(byID))
	for _, ref := range byID {
		out = append(out, ref)
	}
	slices.SortFunc(out, func(a, b api.JobRef) int { return strings.Compare(b.ID, a.ID) })
	return out[:min(len(out), maxRefs)]
}
