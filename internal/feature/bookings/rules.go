package bookings

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/lazyre"
)

// The rules a booking is checked against when it is created or changed
// (docs/bookings.md): who may book what, the weekly allowance of users'
// GPU-hours, and the choice of the specific GPUs it blocks.

// DefaultAllowance is the weekly allowance of a user's booked
// GPU-hours that `corral server` and `corral up` give by default
// (--booking-allowance).
const DefaultAllowance = 64.0

// horizon is how far ahead list expands the occurrences
// of repeating bookings.
const horizon = 7 * 24 * time.Hour

// maxNames bounds the nodes and users one booking names.
const maxNames = 1024

var bookingName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

var knownFlags = []string{api.BookingFlex, api.BookingMagnetic, api.BookingIgnoreJobs, api.BookingDaily, api.BookingWeekly, api.BookingMaint}

// span is one window of a booking.
type span struct{ start, end time.Time }

func (s span) overlaps(t span) bool { return s.start.Before(t.end) && t.start.Before(s.end) }

// period is how often r repeats; 0: it does not.
func period(r *api.Reservation) time.Duration {
	switch {
	case slices.Contains(r.Flags, api.BookingDaily):
		return 24 * time.Hour
	case slices.Contains(r.Flags, api.BookingWeekly):
		return 7 * 24 * time.Hour
	}
	return 0
}

// occurrences returns r's windows from its current one that start before
// to (at least its current one).
func occurrences(r *api.Reservation, to time.Time) []span {
	out := []span{{r.Start, r.End}}
	p := period(r)
	if p == 0 {
		return out
	}
	for s := r.Start.Add(p); s.Before(to); s = s.Add(p) {
		out = append(out, span{s, s.Add(r.End.Sub(r.Start))})
	}
	return out
}

// overlap returns the first window of b that overlaps a window
// of a. Both repeat with periods dividing a week, so looking a week and
// a window past the later start sees every overlap there will be.
func overlap(a, b *api.Reservation) (span, bool) {
	to := later(a.Start, b.Start).Add(8 * 24 * time.Hour).Add(max(a.End.Sub(a.Start), b.End.Sub(b.Start)))
	as := occurrences(a, to)
	for _, w := range occurrences(b, to) {
		for _, v := range as {
			if v.overlaps(w) {
				return w, true
			}
		}
	}
	return span{}, false
}

// live reports whether r still blocks GPUs (neither released nor ended).
func live(r *api.Reservation) bool {
	return r.State != api.BookingReleased && r.State != api.BookingEnded
}

// applyRequest applies req's fields to r (a new booking when
// create) and checks each, naming the field of the first that is wrong.
func applyRequest(r *api.Reservation, req *api.ReservationRequest, create bool, now time.Time) error {
	if req.GPUs != nil {
		if *req.GPUs < 1 {
			return api.Invalid("gpus", "must be 1 or more")
		}
		r.GPUs = *req.GPUs
	} else if create {
		return api.Invalid("gpus", "is required: how many GPUs to book")
	}
	if req.Nodes != nil {
		if len(*req.Nodes) > maxNames {
			return api.Invalid("nodes", "names %d nodes; at most %d are allowed", len(*req.Nodes), maxNames)
		}
		r.Nodes = trimmedSet(*req.Nodes)
	}
	if req.GPUType != nil {
		r.GPUType = strings.TrimSpace(*req.GPUType)
		if err := api.CheckText("gpu_type", r.GPUType, maxUserLen); err != nil {
			return err
		}
	}
	if len(r.Nodes) > 0 && r.GPUType != "" {
		return api.Invalid("nodes", "give nodes or gpu_type, not both")
	}
	oldStart := r.Start
	if req.Start != nil {
		t, err := api.ParseTime("start", *req.Start) // within the bounds the store can write (api/bounds.go)
		if err != nil {
			return err
		}
		d := r.End.Sub(r.Start)
		r.Start = t
		if !create && req.End == nil && api.IsNull(req.Duration) {
			r.End = r.Start.Add(d) // moved, same length
		}
	} else if create {
		return api.Invalid("start", "is required: when the booking begins")
	}
	switch {
	case req.End != nil && !api.IsNull(req.Duration):
		return api.Invalid("end", "give end or duration, not both")
	case req.End != nil:
		t, err := api.ParseTime("end", *req.End)
		if err != nil {
			return err
		}
		r.End = t
	case !api.IsNull(req.Duration):
		s, err := api.ParseSecondsJSON(req.Duration)
		if err != nil {
			return api.Invalid("duration", "%s", err.Error())
		}
		if s.Duration() < time.Minute {
			return api.Invalid("duration", "must be at least 1m")
		}
		r.End = r.Start.Add(s.Duration())
	case create:
		return api.Invalid("end", "is required: give end or duration")
	}
	if !r.End.After(r.Start) {
		return api.Invalid("end", "%s is not after start %s", stamp(r.End), stamp(r.Start))
	}
	// Start + duration (or a start moved with its length kept) may pass
	// the bounds that start and end were each checked against.
	if err := api.CheckTime(endField(req), r.End); err != nil {
		return err
	}
	if !r.End.After(now) {
		return api.Invalid("end", "%s is in the past", stamp(r.End))
	}
	if (create || !r.Start.Equal(oldStart)) && r.Start.Before(now.Add(-time.Minute)) {
		return api.Invalid("start", "%s is in the past", stamp(r.Start))
	}
	if req.Users != nil {
		if len(*req.Users) > maxNames {
			return api.Invalid("users", "names %d users; at most %d are allowed", len(*req.Users), maxNames)
		}
		r.Users = trimmedSet(*req.Users)
		for _, u := range r.Users {
			if len(u) > maxUserLen || !userName.MatchString(u) {
				return api.Invalid("users", "%q is not a valid user name (letters, digits, '_', '.', '@', '-')", truncate(u, 40))
			}
		}
	}
	if req.Project != nil {
		r.Project = strings.TrimSpace(*req.Project)
		if r.Project != "" && (len(r.Project) > maxUserLen || !userName.MatchString(r.Project)) {
			return api.Invalid("project", "%q is not a valid project name (letters, digits, '_', '.', '@', '-')", truncate(r.Project, 40))
		}
	}
	if req.Flags != nil {
		r.Flags = nil
		for _, f := range *req.Flags {
			f = strings.ToLower(strings.TrimSpace(f))
			if f == "" || slices.Contains(r.Flags, f) {
				continue
			}
			if !slices.Contains(knownFlags, f) {
				return api.Invalid("flags", "unknown flag %q; known: %s", f, strings.Join(knownFlags, ", "))
			}
			r.Flags = append(r.Flags, f)
		}
	}
	if p := period(r); p > 0 {
		if slices.Contains(r.Flags, api.BookingDaily) && slices.Contains(r.Flags, api.BookingWeekly) {
			return api.Invalid("flags", "give daily or weekly, not both")
		}
		if r.End.Sub(r.Start) > p {
			return api.Invalid("duration", "is %s: longer than the %s it repeats every", r.End.Sub(r.Start), p)
		}
	}
	return nil
}

// endField is the field a request gave the booking's end by: end, or
// duration, or start (a start moved with its length kept).
func endField(req *api.ReservationRequest) string {
	switch {
	case req.End != nil:
		return "end"
	case !api.IsNull(req.Duration):
		return "duration"
	}
	return "start"
}

// checkBooker refuses what only admins may do: book for others, or a
// maintenance booking.
func checkBooker(r *api.Reservation, who Booker) error {
	if who.Admin {
		return nil
	}
	if slices.Contains(r.Flags, api.BookingMaint) {
		return &api.Error{Status: http.StatusForbidden, Code: "forbidden", Field: "flags", Message: "only admins may make maint bookings"}
	}
	for _, u := range r.Users {
		if u != who.User {
			return &api.Error{Status: http.StatusForbidden, Code: "forbidden", Field: "users",
				Message: fmt.Sprintf("you may book for yourself only (%s), not for %s; admins book for others", who.User, u)}
		}
	}
	return nil
}

// isoWeek returns the ISO week (Monday 00:00 UTC to the next) holding t.
func isoWeek(t time.Time) span {
	t = t.UTC()
	d := (int(t.Weekday()) + 6) % 7 // days since Monday
	start := time.Date(t.Year(), t.Month(), t.Day()-d, 0, 0, 0, 0, time.UTC)
	return span{start, start.AddDate(0, 0, 7)}
}

// gpuHoursIn is r's booked GPU-hours inside week, its repeats counted.
func gpuHoursIn(r *api.Reservation, week span) float64 {
	var h float64
	for _, w := range occurrences(r, week.end) {
		s, e := later(w.start, week.start), w.end
		if e.After(week.end) {
			e = week.end
		}
		if e.After(s) {
			h += float64(r.GPUs) * e.Sub(s).Hours()
		}
	}
	return h
}

// checkAllowance refuses a user's booking that would take their booked
// GPU-hours past the weekly allowance in any ISO week it touches in its
// first two weeks (a repeating booking books the same every week after).
// Admins are not bounded.
func (b *Books) checkAllowance(r *api.Reservation, who Booker) error {
	if who.Admin {
		return nil
	}
	allow := b.cfg.Allowance
	switch {
	case allow == 0:
		allow = DefaultAllowance
	case allow < 0:
		return &api.Error{Status: http.StatusForbidden, Code: "forbidden", Field: "gpus",
			Message: "only admins book GPUs on this server (--booking-allowance 0)"}
	}
	seen := map[time.Time]bool{}
	for _, w := range occurrences(r, r.Start.Add(14*24*time.Hour)) {
		for _, week := range []span{isoWeek(w.start), isoWeek(w.end.Add(-time.Nanosecond))} {
			if seen[week.start] {
				continue
			}
			seen[week.start] = true
			var have float64
			for _, o := range b.byName {
				if o.Name != r.Name && o.Owner == r.Owner && live(o) {
					have += gpuHoursIn(o, week)
				}
			}
			want := gpuHoursIn(r, week)
			if have+want > allow+1e-9 {
				return &api.Error{Status: http.StatusUnprocessableEntity, Code: "booking_allowance_exceeded", Field: "gpus",
					Message: fmt.Sprintf("%s asks %.1f GPU-hours in the week of %s; %s already has %.1f GPU-hours booked that week, and the allowance is %.4g GPU-hours per user per week (--booking-allowance)",
						r.Name, want, week.start.Format("2006-01-02"), r.Owner, have, allow)}
			}
		}
	}
	return nil
}

// maxBlockers is how many bookings, jobs or holds in the way a refusal
// names (then: "and N more").
const maxBlockers = 5

// blocker is why a GPU cannot be booked: another booking's window, or a
// running job or hold expected to run into the booking.
type blocker struct {
	what string   // "booked by vision 2026-12-01 09:00-17:00 UTC"
	gpus []gpuKey // in order
}

// allocate chooses the GPUs r blocks: of its nodes (or every node
// that is up) and of its GPU type, free of other live bookings over each
// of its windows and, unless ignore_jobs, not held by running jobs or
// holds expected to run into its start. It prefers the current
// allocation when it still fits, then one node (the fullest that fits),
// then the nodes with most free GPUs.
func (b *Books) allocate(r *api.Reservation) ([]api.Allocation, error) {
	book := b.cluster.Nodes()
	for _, n := range r.Nodes {
		if !book.Has(n) {
			return nil, api.Invalid("nodes", "no node %q in the cluster", n)
		}
	}
	type gpuInfo struct {
		uuid string
		mem  float64
		sim  bool
	}
	cand := map[gpuKey]gpuInfo{}
	var order []gpuKey
	for i := range book.Len() {
		n := book.At(i)
		if len(r.Nodes) > 0 && !slices.Contains(r.Nodes, n.ID) || len(r.Nodes) == 0 && n.IsDown() {
			continue
		}
		for _, d := range n.Devices {
			if r.GPUType != "" && !strings.Contains(strings.ToLower(d.Model), strings.ToLower(r.GPUType)) {
				continue
			}
			if d.MIG != nil && d.MIG.Mode == api.MIGEnabled && len(d.MIG.Devices) > 0 {
				continue // in MIG mode: placed as slices, never booked whole
			}
			k := gpuKey{n.ID, d.Index}
			cand[k] = gpuInfo{d.UUID, float64(d.MemoryMiB) / 1024, d.Simulated}
			order = append(order, k)
		}
	}
	if len(order) < r.GPUs {
		what := "the cluster has"
		switch {
		case len(r.Nodes) > 0:
			what = strings.Join(r.Nodes, ",") + " have"
		case r.GPUType != "":
			what = "the cluster has"
			return nil, api.Invalid("gpus", "asks for %d GPUs of type %s; %s %d", r.GPUs, r.GPUType, what, len(order))
		}
		return nil, api.Invalid("gpus", "asks for %d GPUs; %s %d", r.GPUs, what, len(order))
	}
	blocked := map[gpuKey]bool{}
	var why []blocker
	block := func(what string, ks []gpuKey) {
		var mine []gpuKey
		for _, k := range ks {
			if _, ok := cand[k]; ok && !blocked[k] {
				blocked[k] = true
				mine = append(mine, k)
			}
		}
		if len(mine) > 0 {
			why = append(why, blocker{what, mine})
		}
	}
	for _, name := range b.names() {
		o := b.byName[name]
		if name == r.Name || !live(o) {
			continue
		}
		w, ok := overlap(r, o)
		if !ok {
			continue
		}
		ks := make([]gpuKey, 0, len(o.Allocation))
		for _, a := range o.Allocation {
			ks = append(ks, gpuKey{a.NodeID, a.GPUID})
		}
		block("booked by "+o.Name+" "+window(w), ks)
	}
	// Slurm's rule is for a window yet to begin (a change to a booking in
	// its window does not meet the jobs running in it).
	if !slices.Contains(r.Flags, api.BookingIgnoreJobs) && (r.State != api.BookingActive || r.Start.After(b.cfg.Now())) {
		b.blockRunning(r.Name, r.Start, block)
	}
	if keep := r.Allocation; len(keep) == r.GPUs {
		ok := true
		for _, a := range keep {
			if _, c := cand[gpuKey{a.NodeID, a.GPUID}]; !c || blocked[gpuKey{a.NodeID, a.GPUID}] {
				ok = false
			}
		}
		if ok {
			return keep, nil
		}
	}
	free := map[string][]gpuKey{}
	var nodes []string
	for _, k := range order {
		if blocked[k] {
			continue
		}
		if len(free[k.node]) == 0 {
			nodes = append(nodes, k.node)
		}
		free[k.node] = append(free[k.node], k)
	}
	var pick []gpuKey
	best := ""
	for _, n := range nodes {
		if len(free[n]) >= r.GPUs && (best == "" || len(free[n]) < len(free[best])) {
			best = n
		}
	}
	if best != "" {
		pick = free[best][:r.GPUs]
	} else {
		slices.SortStableFunc(nodes, func(a, b string) int { return cmp.Compare(len(free[b]), len(free[a])) })
		for _, n := range nodes {
			pick = append(pick, free[n][:min(len(free[n]), r.GPUs-len(pick))]...)
		}
	}
	if len(pick) < r.GPUs {
		parts := make([]string, 0, min(len(why), maxBlockers)+1)
		for i, w := range why {
			if i == maxBlockers {
				parts = append(parts, fmt.Sprintf("and %d more bookings, jobs or holds", len(why)-maxBlockers))
				break
			}
			verb := " are "
			if len(w.gpus) == 1 {
				verb = " is "
			}
			parts = append(parts, keysText(w.gpus)+verb+w.what)
		}
		return nil, &api.Error{Status: http.StatusUnprocessableEntity, Code: "booking_conflict", Field: "gpus",
			Message: fmt.Sprintf("%s needs %d GPUs %s; only %d are free then: %s", r.Name, r.GPUs, window(span{r.Start, r.End}), len(pick), strings.Join(parts, "; "))}
	}
	out := make([]api.Allocation, 0, len(pick))
	for _, k := range pick {
		g := cand[k]
		out = append(out, api.Allocation{NodeID: k.node, GPUID: k.index, GPUUUID: g.uuid, MemoryGB: g.mem, Simulated: g.sim})
	}
	return out, nil
}

// blockRunning blocks the GPUs of active jobs (but those of the booking
// named name) and holds expected to run past start (Slurm's rule): a job
// until its time limit (else its estimate, else for ever), a hold until
// its expiry.
func (b *Books) blockRunning(name string, start time.Time, block func(string, []gpuKey)) {
	for _, id := range b.cluster.SortedActiveIDs() {
		j := b.cluster.Get(id)
		if j == nil || j.Reservation == name {
			continue
		}
		from := b.cfg.Now()
		if j.StartedAt != nil {
			from = *j.StartedAt
		}
		what := "held by running job " + j.ID + " (no time limit)"
		var end time.Time
		switch {
		case j.TimeLimit != nil:
			end = from.Add(j.TimeLimit.Duration())
			what = "held by running job " + j.ID + " until " + stamp(end) + " (its time limit)"
		case j.EstimatedDuration != nil:
			end = from.Add(j.EstimatedDuration.Duration())
			what = "held by running job " + j.ID + " until " + stamp(end) + " (its estimate)"
		}
		if !end.IsZero() && !end.After(start) {
			continue
		}
		ks := make([]gpuKey, 0, len(j.Allocation))
		for _, a := range j.Allocation {
			ks = append(ks, gpuKey{a.NodeID, a.GPUID})
		}
		block(what, ks)
	}
	if b.cfg.Holds == nil {
		return
	}
	for _, h := range b.cfg.Holds.Sorted() {
		end := b.cfg.Holds.Expiry(h)
		what := "held by hold " + h.JobID
		if !end.IsZero() {
			if !end.After(start) {
				continue
			}
			what += " until " + stamp(end)
		}
		ks := make([]gpuKey, 0, len(h.Allocation))
		for _, a := range h.Allocation {
			ks = append(ks, gpuKey{a.NodeID, a.GPUID})
		}
		block(what, ks)
	}
}

// gpuKey is one GPU: a node and the GPU's index on it.
type gpuKey struct {
	node  string
	index int
}

// names returns the bookings' names in order.
func (b *Books) names() []string {
	names := make([]string, 0, len(b.byName))
	for name := range b.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
