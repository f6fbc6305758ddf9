// Package holds keeps GPUs held outside the queue: interactive
// allocations (docs/interactive.md). A hold granted at once stays what it
// was, GPUs in the orchestrator's books under its name for work outside
// Corral, and has an expiry; it counts in fair share while it lasts
// (AddToSnapshot) and in usage when it ends (Ended), and the why-pending
// of jobs waiting for GPUs names it (Note). A hold asked with "wait" that
// cannot be granted now becomes an interactive job, which the
// orchestrator queues: it is no hold of these books.
//
// Books holds the holds and the decayed GPU time of those that ended; the
// orchestrator's loop places and frees their GPUs and calls Books with
// the write lock held.
package holds

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/sched"
)

// Project is the project a hold's GPU time counts against (holds name no
// project).
const Project = "default"

// settingUsage is the store key of the holds' past GPU usage per user, as
// JSON. Jobs' usage is rebuilt from the jobs themselves; holds leave no
// job behind, so their usage is kept here, written in the transaction
// that ends the hold.
const settingUsage = "hold_usage"

// Used is one user's decayed GPU-seconds of ended holds, as of At.
type Used struct {
	GPUSeconds float64   `json:"gpu_seconds"`
	At         time.Time `json:"at"`
}

// Books are the live holds and the usage of the ended ones.
type Books struct {
	// maxTime is the server's longest interactive time: a hold's default
	// and largest duration, and the expiry of a hold stored before holds
	// had one. 0: no maximum (the default duration is then DefaultTime).
	maxTime time.Duration
	byID    map[string]*api.Hold
	used    map[string]Used
}

// DefaultTime is a hold's duration where the server sets no maximum.
const DefaultTime = 8 * time.Hour

// New returns empty books; maxTime is the server's longest interactive
// time (0: none).
func New(maxTime time.Duration) *Books {
	return &Books{maxTime: maxTime, byID: map[string]*api.Hold{}, used: map[string]Used{}}
}

// Duration is a hold's duration from the request: the server's maximum
// by default and at most (without a maximum, DefaultTime by default).
func (b *Books) Duration(raw api.RawValue) (time.Duration, error) {
	d := b.maxTime
	if d <= 0 {
		d = DefaultTime
	}
	if !api.IsNull(raw) {
		s, err := api.ParseSecondsJSON(raw)
		if err != nil {
			return 0, api.Invalid("duration", "%s", err.Error())
		}
		if s.Duration() < time.Second {
			return 0, api.Invalid("duration", "must be at least 1s")
		}
		if b.maxTime > 0 && s.Duration() > b.maxTime {
			return 0, api.Invalid("duration", "is %s; a hold may last at most %s on this server (--max-interactive-time)", s.Duration(), b.maxTime)
		}
		d = s.Duration()
	}
	return d, nil
}

// Get returns the hold named id.
func (b *Books) Get(id string) (*api.Hold, bool) {
	h, ok := b.byID[id]
	return h, ok
}

// Add keeps a hold: one just granted, or one loaded at start-up.
func (b *Books) Add(h *api.Hold) { b.byID[h.JobID] = h }

// Len is how many holds there are.
func (b *Books) Len() int { return len(b.byID) }

// All yields the holds in no order.
func (b *Books) All() iter.Seq[*api.Hold] { return maps.Values(b.byID) }

// Sorted returns the holds by name.
func (b *Books) Sorted() []*api.Hold {
	ids := slices.Sorted(maps.Keys(b.byID))
	out := make([]*api.Hold, len(ids))
	for i, id := range ids {
		out[i] = b.byID[id]
	}
	return out
}

// Expiry is when a hold ends: its ExpiresAt, or, for a hold made before
// holds expired, the server's maximum after it was taken (zero: never).
func (b *Books) Expiry(h *api.Hold) time.Time {
	if h.ExpiresAt != nil {
		return *h.ExpiresAt
	}
	if b.maxTime > 0 {
		return h.HeldAt.Add(b.maxTime)
	}
	return time.Time{}
}

// Due returns the holds past their expiry at now.
func (b *Books) Due(now time.Time) []*api.Hold {
	var due []*api.Hold
	for _, h := range b.byID {
		if at := b.Expiry(h); !at.IsZero() && !now.Before(at) {
			due = append(due, h)
		}
	}
	return due
}

// Ended forgets hold h, released or expired at tx's time, and charges
// its GPU time to its user's decayed usage of holds (halfLife: the
// ledger's), written in tx. It returns the GPU-seconds held, for the
// orchestrator's ledger and usage records.
func (b *Books) Ended(tx feature.Tx, h *api.Hold, halfLife time.Duration) (float64, error) {
	delete(b.byID, h.JobID)
	batch := tx.Batch()
	batch.DeleteHolds = append(batch.DeleteHolds, h.JobID)
	held := tx.Now().Sub(h.HeldAt)
	if held <= 0 {
		return 0, nil
	}
	eq := 0.0
	for _, a := range h.Allocation {
		eq += a.Equivalents() // a slice or share: its fraction of the GPU
	}
	gs := eq * held.Seconds()
	u := b.used[h.User]
	if now := tx.Now(); !u.At.IsZero() && now.After(u.At) {
		u.GPUSeconds *= math.Exp2(-float64(now.Sub(u.At)) / float64(halfLife))
	}
	u.GPUSeconds += gs
	u.At = tx.Now()
	b.used[h.User] = u
	raw, err := json.Marshal(b.used)
	if err != nil {
		return gs, fmt.Errorf("hold usage not encoded: %w", err)
	}
	if batch.Settings == nil {
		batch.Settings = map[string]string{}
	}
	batch.Settings[settingUsage] = string(raw)
	return gs, nil
}

// LoadUsage reads the ended holds' usage from the stored settings, at
// start-up. An unreadable value is forgotten (the error says so).
func (b *Books) LoadUsage(settings map[string]string) error {
	raw := settings[settingUsage]
	if raw == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), &b.used); err != nil {
		b.used = map[string]Used{}
		return fmt.Errorf("stored hold usage unreadable: %w", err)
	}
	return nil
}

// Usage yields each user's decayed GPU-seconds of ended holds, as of
// their time, for the orchestrator's ledger to decay from there.
func (b *Books) Usage() iter.Seq2[string, Used] { return maps.All(b.used) }

// AddToSnapshot adds the holds to the core's running work
// (feature.SnapshotPart): they count in quotas and fair share like
// interactive jobs (never preempted), and the plan sees when they end.
func (b *Books) AddToSnapshot(snap *sched.Snapshot, now time.Time) {
	for _, h := range b.byID {
		r := sched.Running{ID: h.JobID, User: h.User, Project: Project, Priority: int(api.PriorityNormal),
			StartedAt: h.HeldAt, SubmittedAt: h.HeldAt, Class: sched.ClassInteractive}
		if at := b.Expiry(h); !at.IsZero() {
			r.Estimate = max(at.Sub(h.HeldAt), now.Sub(h.HeldAt))
		}
		r.Placements = sched.PlacementsOf(h.Allocation)
		snap.Running = append(snap.Running, r)
	}
}

// Note names, in the why-pending of a job waiting for GPUs, the holds
// that keep GPUs from it (at most three).
func (b *Books) Note(v *api.Job) {
	if len(b.byID) == 0 || v.State != api.StateQueued {
		return
	}
	switch v.PendingReason {
	case sched.ReasonResources, sched.ReasonBackfillReserved, sched.ReasonBooking, sched.ReasonBehindHead:
	default:
		return
	}
	hs := b.Sorted()
	var parts []string
	for _, h := range hs {
		if len(parts) == 3 {
			parts = append(parts, fmt.Sprintf("and %d more holds", len(hs)-3))
			break
		}
		until := ""
		if at := b.Expiry(h); !at.IsZero() {
			until = " until " + at.UTC().Format("15:04 UTC")
		}
		owner := h.User
		if owner == "" {
			owner = "someone"
		}
		parts = append(parts, fmt.Sprintf("%s held by %s's hold %s%s", Held(h.Allocation), owner, h.JobID, until))
	}
	v.PendingMessage += "; " + strings.Join(parts, "; ")
}

// Held says what an allocation takes: which GPUs (GPUs), or the part of
// one: "the 1g.10gb slice 3 of GPU 0 on n1", "a 20 GiB share of GPU 1 on
// n1".
func Held(as []api.Allocation) string {
	if len(as) != 1 {
		return GPUs(as)
	}
	switch a := as[0]; {
	case a.MIG != nil:
		return fmt.Sprintf("the %s slice %d of GPU %d on %s", a.MIG.Profile, a.MIG.Index, a.GPUID, a.NodeID)
	case a.ShareMiB > 0:
		size := strconv.FormatInt(a.ShareMiB, 10) + " MiB"
		if a.ShareMiB%1024 == 0 {
			size = strconv.FormatInt(a.ShareMiB/1024, 10) + " GiB"
		}
		return fmt.Sprintf("a %s share of GPU %d on %s", size, a.GPUID, a.NodeID)
	}
	return GPUs(as)
}

// GPUs says which GPUs an allocation takes: "GPUs 0-1 on node-1".
func GPUs(as []api.Allocation) string {
	var out []string
	for i := 0; i < len(as); {
		k := i
		var idx []int
		for ; k < len(as) && as[k].NodeID == as[i].NodeID; k++ {
			idx = append(idx, as[k].GPUID)
		}
		out = append(out, "GPU"+plural(len(idx))+" "+ranges(idx)+" on "+as[i].NodeID)
		i = k
	}
	return strings.Join(out, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ranges writes sorted indexes as runs: 0-1,4.
func ranges(idx []int) string {
	slices.Sort(idx)
	var b strings.Builder
	for i := 0; i < len(idx); {
		k := i
		for k+1 < len(idx) && idx[k+1] == idx[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		if k > i {
			b.WriteString("-" + strconv.Itoa(idx[k]))
		}
		i = k + 1
	}
	return b.String()
}

// AsJob is the submission a hold asked with "wait" becomes when it cannot
// be granted now: an interactive job named for the hold whose process
// only sleeps for the hold's duration d (it waits, starts, is counted and
// ends like any job, and its job id is the hold's id from then on); and
// the job's time limit, a minute past d, a backstop to the process that
// ends the hold at d.
func AsJob(req api.AllocateRequest, user string, d time.Duration) (api.SubmitRequest, api.Seconds) {
	n := req.GPUCount
	secs := int64(d / time.Second)
	sreq := api.SubmitRequest{Name: req.JobID, User: user, Command: "sleep " + strconv.FormatInt(secs, 10),
		GPUCount: &n, GPUMemoryGB: req.MemoryGB, GPUType: req.GPUType, Class: api.ClassInteractive,
		TimeLimit: api.RawValue(strconv.Quote(d.String())), GPUPart: req.GPUPart}
	return sreq, api.Seconds((d + time.Minute).Seconds())
}
