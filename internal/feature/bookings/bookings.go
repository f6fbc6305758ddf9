// Package bookings keeps GPUs booked ahead for a window of time
// (docs/bookings.md; the API calls them reservations): who may book what,
// the weekly allowance of users' GPU-hours, the choice of the GPUs a
// booking blocks, its repeats, the release of a booking left unused, the
// blocked intervals handed to the core (docs/bookings-scheduling.md), and
// the end of a window: its idle GPU time charged, its jobs stopped.
//
// Books holds the bookings by name and the running jobs of bookings. What
// it reads of the orchestrator's books (jobs, the GPUs active jobs hold,
// the nodes' GPUs) comes through Cluster; holds through the holds
// feature's Books. The orchestrator's loop calls its methods with its
// write lock held (the read methods with a read lock), and makes the
// transactions its changes are written in.
//
//	API op ─▶ Create/Update/Delete(tx) ─┐
//	tick ───▶ Step(tx) ─────────────────┴▶ batch.Bookings ─▶ commit
//	cycle ──▶ AddToSnapshot ─▶ sched.Schedule ─▶ Started, expiries
package bookings

import (
	"iter"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/holds"
	"github.com/corral-sched/corral/internal/nodebook"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
)

// Cluster is what the feature reads of the orchestrator's books, and the
// two things it asks of them. Its methods are called with the
// orchestrator's write lock held (a read lock for the reads), from the
// feature's own methods only.
type Cluster interface {
	// Get is the job with id in memory (queued or active), or nil.
	Get(id string) *api.Job
	// Lookup is a job in memory: a live one, or one recently ended.
	Lookup(id string) (*api.Job, bool)
	// IsActive reports whether job id is active (holds its GPUs).
	IsActive(id string) bool
	// ActiveIDs yields the ids of the active jobs, in no order.
	ActiveIDs() iter.Seq[string]
	// SortedActiveIDs returns the ids of the active jobs, in order.
	SortedActiveIDs() []string
	// Nodes is the cluster's nodes, in the cluster's order (the node
	// books themselves: the choice of a booking's GPUs walks them by
	// index, without allocating).
	Nodes() *nodebook.Book
	// PreemptGrace is the policy's SIGTERM to SIGKILL time of a
	// preempted job that names none.
	PreemptGrace() time.Duration
	// ChargeIdle charges the GPU time a booking's window left idle to its
	// booker, in tx (the usage ledger's rows).
	ChargeIdle(tx feature.Tx, r *api.Reservation, gpuSeconds float64)
	// Replan asks for a scheduling cycle: the plan sees bookings.
	Replan()
}

// Noter notes a notification for the next commit (feature/notes' Notes).
type Noter interface {
	On() bool
	Note(ev notify.Event)
}

// Booker is who creates or changes a booking.
type Booker struct {
	User  string
	Admin bool
}

// Config is what the feature is built with.
type Config struct {
	// Allowance is the weekly allowance of a user's booked GPU-hours
	// (admins are not bounded; 0: DefaultAllowance; negative: users
	// cannot book).
	Allowance float64
	// PurgeAfter is how long after its start an unused booking is
	// released (0: DefaultPurgeAfter; negative: never).
	PurgeAfter time.Duration
	// Now is the clock (the orchestrator's).
	Now func() time.Time
	// Holds are the GPUs held outside the queue, which a new booking
	// does not take from them.
	Holds *holds.Books
	// Notes is told of bookings released unused; nil: nobody is.
	Notes Noter
	// Log logs each booking's changes; nil: slog.Default().
	Log *slog.Logger
}

// Books are the bookings and the running jobs of bookings.
type Books struct {
	cluster Cluster
	cfg     Config
	byName  map[string]*api.Reservation
	// running are the jobs of bookings seen running, by id (in memory
	// only: a job that ends is counted when it is seen gone).
	running map[string]runningJob
}

// New returns empty books reading cluster.
func New(cluster Cluster, cfg Config) *Books {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Books{cluster: cluster, cfg: cfg, byName: map[string]*api.Reservation{}}
}

// Len is how many bookings there are, released and ended ones included.
func (b *Books) Len() int { return len(b.byName) }

// Add keeps booking r as it is, without a check or a record (recovery
// and tests).
func (b *Books) Add(r *api.Reservation) { b.byName[r.Name] = r }

// Load puts the store's bookings in memory (feature.Loader).
func (b *Books) Load(st *store.State) {
	for i := range st.Bookings {
		r := st.Bookings[i]
		b.byName[r.Name] = &r
	}
}

// List returns every booking (released and ended ones too), by start
// then name.
func (b *Books) List() []api.Reservation {
	out := make([]api.Reservation, 0, len(b.byName))
	for _, r := range b.byName {
		out = append(out, Clone(r))
	}
	slices.SortFunc(out, func(a, b api.Reservation) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Get returns the booking named name.
func (b *Books) Get(name string) (api.Reservation, error) {
	r, ok := b.byName[name]
	if !ok {
		return api.Reservation{}, api.NotFound("no booking %q", name)
	}
	return Clone(r), nil
}

// CheckCreate checks what a creation can be refused for before the loop
// sees it: the name, trimmed in req.
func CheckCreate(req *api.ReservationRequest) error {
	req.Name = strings.TrimSpace(req.Name)
	if !bookingName.MatchString(req.Name) {
		return api.Invalid("name", "%q is not a booking name: letters, digits, '.', '_' and '-', at most 63, starting with a letter or digit", req.Name)
	}
	return nil
}

// CheckUpdate checks what a change can be refused for before the loop
// sees it: a booking cannot be renamed.
func CheckUpdate(name string, req *api.ReservationRequest) error {
	if req.Name != "" && req.Name != name {
		return api.Invalid("name", "a booking cannot be renamed")
	}
	return nil
}

// Create checks and makes a booking for who, in tx (req passed
// CheckCreate): its owner is who; its users default to who. A name in use
// by a live booking is a 409; one of a released or ended booking is taken
// over.
func (b *Books) Create(tx feature.Tx, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	now := tx.Now()
	if old, ok := b.byName[req.Name]; ok && live(old) {
		return api.Reservation{}, api.Conflict("reservation_exists", "a booking named %q exists (%s); pick another name or change it with PATCH", req.Name, old.State)
	}
	r := &api.Reservation{Name: req.Name, Owner: who.User, CreatedAt: now, State: api.BookingScheduled}
	if err := applyRequest(r, &req, true, now); err != nil {
		return api.Reservation{}, err
	}
	if len(r.Users) == 0 {
		r.Users = []string{who.User}
	}
	if err := b.admit(r, who); err != nil {
		return api.Reservation{}, err
	}
	if !r.Start.After(now) {
		r.State = api.BookingActive
	}
	b.byName[r.Name] = r
	b.save(tx, r)
	b.cfg.Log.Info("booking created", "booking", r.Name, "owner", r.Owner, "gpus", r.GPUs, "start", r.Start, "end", r.End)
	return Clone(r), nil
}

// Update changes the fields req gives of a live booking (its owner's or,
// for admins, anyone's), in tx, checked as a new one would be; its GPUs
// stay where they still fit.
func (b *Books) Update(tx feature.Tx, name string, req api.ReservationRequest, who Booker) (api.Reservation, error) {
	now := tx.Now()
	old, err := b.own(name, who)
	if err != nil {
		return api.Reservation{}, err
	}
	if !live(old) {
		return api.Reservation{}, api.Conflict("reservation_over", "booking %q is %s; it can no longer change", name, old.State)
	}
	r := new(Clone(old))
	if err := applyRequest(r, &req, false, now); err != nil {
		return api.Reservation{}, err
	}
	if len(r.Users) == 0 {
		r.Users = []string{r.Owner}
	}
	if err := b.admit(r, who); err != nil {
		return api.Reservation{}, err
	}
	if r.State == api.BookingScheduled && !r.Start.After(now) {
		r.State = api.BookingActive
	} else if r.State == api.BookingActive && r.Start.After(now) {
		r.State = api.BookingScheduled
	}
	b.byName[name] = r
	b.save(tx, r)
	b.cfg.Log.Info("booking changed", "booking", name, "by", who.User)
	return Clone(r), nil
}

// Delete cancels a booking, in tx: one whose window has not begun is
// forgotten; one in its window is released, its idle GPU time so far
// charged to its booker. It returns the booking as it was left.
func (b *Books) Delete(tx feature.Tx, name string, who Booker) (api.Reservation, error) {
	now := tx.Now()
	r, err := b.own(name, who)
	if err != nil {
		return api.Reservation{}, err
	}
	if live(r) && !r.Start.After(now) {
		b.close(tx, r, api.BookingReleased, now, false)
		return Clone(r), nil
	}
	delete(b.byName, name)
	delete(b.running, name)
	batch := tx.Batch()
	batch.DeleteBookings = append(batch.DeleteBookings, name)
	b.cluster.Replan()
	b.cfg.Log.Info("booking deleted", "booking", name, "by", who.User)
	return Clone(r), nil
}

// own returns the booking named name if who may change it: its owner or
// an admin.
func (b *Books) own(name string, who Booker) (*api.Reservation, error) {
	r, ok := b.byName[name]
	if !ok {
		return nil, api.NotFound("no booking %q", name)
	}
	if !who.Admin && r.Owner != who.User {
		return nil, &api.Error{Status: http.StatusForbidden, Code: "forbidden",
			Message: "booking " + name + " is " + r.Owner + "'s; only its booker or an admin may change it"}
	}
	return r, nil
}

// admit checks who may make r, the allowance, and chooses its GPUs.
func (b *Books) admit(r *api.Reservation, who Booker) error {
	if err := checkBooker(r, who); err != nil {
		return err
	}
	if err := b.checkAllowance(r, who); err != nil {
		return err
	}
	a, err := b.allocate(r)
	if err != nil {
		return err
	}
	r.Allocation = a
	return nil
}

// save writes r's record in tx and asks for a cycle (the plan sees
// bookings).
func (b *Books) save(tx feature.Tx, r *api.Reservation) {
	batch := tx.Batch()
	batch.Bookings = append(batch.Bookings, Clone(r))
	b.cluster.Replan()
}

// Clone copies r, slices and pointers included.
func Clone(r *api.Reservation) api.Reservation {
	c := *r
	c.Nodes = slices.Clone(r.Nodes)
	c.Users = slices.Clone(r.Users)
	c.Flags = slices.Clone(r.Flags)
	c.Allocation = slices.Clone(r.Allocation)
	if c.Allocation == nil {
		c.Allocation = []api.Allocation{}
	}
	for _, p := range []**time.Time{&c.UsedAt, &c.ReleasedAt, &c.EndedAt} {
		if *p != nil {
			*p = new(**p)
		}
	}
	return c
}
