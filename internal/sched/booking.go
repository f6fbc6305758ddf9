package sched

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bookings (Slurm's reservations, with Slurm's semantics) as the core
// sees them: specific GPUs blocked over an interval [Start, End).
//
//   - In its window a booked GPU serves only the booking's jobs: those
//     submitted with Booking == Name by one of its Users, or, under
//     Magnetic, its users' jobs that named no booking. Under Maint nobody's.
//   - Before its window a job starts on a booked GPU only if it is expected
//     to end by the window's start (its TimeLimit when it has one, else its
//     Estimate); so backfill plans around bookings. Preemptible work (class
//     batch or interactive-preemptible) may start there anyway when nothing
//     else fits, and is told to stop (a Preemption with ReasonBookingPreemption) at the
//     window's start minus its Grace.
//   - A job with a Booking runs only on its booking's GPUs, in its
//     window; before it, it waits with reason ReasonBooking.
//   - When the window ends, the jobs running in it (naming it, or, under
//     Magnetic, its users' jobs that named no booking) are listed in
//     Result.Expired (the time-limit treatment) unless the booking is Flex.
//
// A cycle keeps, for the job at hand, the GPUs of the bookings that keep it
// out blocked in the index (index.block): placement, preemption and the
// head's reservation then see only the GPUs the job may use.

// Booking is one booking's occurrence.
type Booking struct {
	Name       string
	Placements []Placement // the booked GPUs
	Start, End time.Time
	Users      []string
	Project    string
	Flex       bool // jobs in it may run past its end
	Magnetic   bool // its users' jobs that name no booking land in it
	Maint      bool // maintenance: no job runs in it
}

// Expiry is a running job whose booking's window has ended: it is to be
// stopped like a job past its time limit.
type Expiry struct {
	JobID   string
	Booking string
	Message string
}

// Reasons of the bookings' decisions.
const (
	// ReasonBooking: a booking keeps the job out: it waits for the window
	// of the booking it named, may not use that booking, or would fit now
	// but for a booking's GPUs.
	ReasonBooking           = "booking"
	ReasonBookingPreemption = "booking_preemption" // preemption: a booking's window starts on the job's GPUs
	ReasonBookingEnded      = "reservation_ended"  // expiry: the job's booking ended (not flex)
)

// bookGPU is a booked GPU: node and GPU positions in the index.
type bookGPU struct{ n, g int32 }

// bookings is a cycle's view of the snapshot's bookings, ordered by start.
type bookings struct {
	list   []*Booking
	gpus   [][]bookGPU // by booking: its GPUs in the index
	on     []bool      // by booking: its GPUs are blocked for the job at hand
	byName map[string]int
	nodes  map[string][]int // node id -> bookings with GPUs on it
	magnet []int            // magnetic bookings in their window
	notes  []*noteSrc       // by booking: the sentence that names it, once built

	// The mask at hand (see apply): a booking blocks the job when it has
	// not ended, the job is not its member, and it is in its window or is
	// among the first p bookings ahead (by start).
	active  []bool              // by booking: in its window
	startAt []int64             // by booking: its start on the timeline (relative to now)
	endAt   []int64             // by booking: its end, likewise
	ahead   []int               // the bookings ahead, by start
	aheadAt []int64             // their starts on the timeline
	members map[[2]string][]int // (user, booking it names) -> the bookings it is a member of
	curMem  []int               // the members of the mask at hand
	inMem   []bool              // by booking: in curMem
	curP    int                 // its p
	// onPos: by node position, then GPU position, the bookings of the
	// GPU; nil for a node without bookings.
	onPos [][][]int
}

func newBookings(ix *index, bs []Booking, now time.Time) *bookings {
	if len(bs) == 0 {
		return nil
	}
	bk := &bookings{byName: make(map[string]int, len(bs)), nodes: map[string][]int{}}
	for i := range bs {
		if bs[i].End.After(bs[i].Start) {
			bk.list = append(bk.list, &bs[i])
		}
	}
	slices.SortStableFunc(bk.list, func(a, b *Booking) int { return a.Start.Compare(b.Start) })
	bk.gpus = make([][]bookGPU, len(bk.list))
	bk.on = make([]bool, len(bk.list))
	bk.notes = make([]*noteSrc, len(bk.list))
	for i, b := range bk.list {
		if _, dup := bk.byName[b.Name]; !dup {
			bk.byName[b.Name] = i // the earliest occurrence of a repeating booking
		}
		for _, p := range b.Placements {
			n, ok := ix.byID[p.NodeID]
			if !ok {
				continue
			}
			if l := bk.nodes[p.NodeID]; len(l) == 0 || l[len(l)-1] != i {
				bk.nodes[p.NodeID] = append(l, i)
			}
			for _, idx := range p.GPUs {
				if g, ok := ix.nodes[n].at(idx); ok {
					bk.gpus[i] = append(bk.gpus[i], bookGPU{int32(n), int32(g)})
				}
			}
		}
		if b.Magnetic && !b.Maint && !now.Before(b.Start) && now.Before(b.End) {
			bk.magnet = append(bk.magnet, i)
		}
	}
	bk.active = make([]bool, len(bk.list))
	bk.inMem = make([]bool, len(bk.list))
	bk.startAt = make([]int64, len(bk.list))
	bk.endAt = make([]int64, len(bk.list))
	bk.members = map[[2]string][]int{}
	bk.onPos = make([][][]int, len(ix.nodes))
	for i, b := range bk.list {
		bk.startAt[i], bk.endAt[i] = rel(b.Start, now), rel(b.End, now)
		bk.active[i] = bk.startAt[i] <= 0 && bk.endAt[i] > 0
		if bk.startAt[i] > 0 {
			bk.ahead = append(bk.ahead, i)
			bk.aheadAt = append(bk.aheadAt, bk.startAt[i])
		}
		for _, g := range bk.gpus[i] {
			if bk.onPos[g.n] == nil {
				bk.onPos[g.n] = make([][]int, len(ix.nodes[g.n].free))
			}
			bk.onPos[g.n][g.g] = append(bk.onPos[g.n][g.g], i)
		}
	}
	return bk
}

// memberOf returns the bookings a job of user naming res belongs in.
func (bk *bookings) memberOf(user, res string) []int {
	k := [2]string{user, res}
	ms, ok := bk.members[k]
	if !ok {
		for i, b := range bk.list {
			if member(b, user, res) {
				ms = append(ms, i)
			}
		}
		bk.members[k] = ms
	}
	return ms
}

// runFor is how long a job is expected to hold its GPUs: its time limit
// when it has one, else its estimate.
func runFor(j *Job) time.Duration {
	if j.TimeLimit > 0 {
		return j.TimeLimit
	}
	return j.Estimate
}

// mayRunInto reports whether a job of class may start on GPUs booked
// ahead that it would still hold when the window starts (it is then
// preempted at the window's start minus its grace): work that declared
// itself preemptible (class preemptible or interactive-preemptible).
// Plain batch work is kept off such GPUs, as Slurm keeps jobs off a
// reservation (its word for a booking) they would run into.
func mayRunInto(class string) bool {
	return class == ClassPreemptible || class == ClassInteractivePreemptible
}

// member reports whether a job of user, naming booking res ("" none),
// belongs in booking b's window.
func member(b *Booking, user, res string) bool {
	if b.Maint || !slices.Contains(b.Users, user) {
		return false
	}
	return res == b.Name || res == "" && b.Magnetic
}

// apply blocks, in the index, the GPUs of the bookings that keep j out
// (the rule blocks in booking_test.go says plainly) and unblocks the others. It changes only what differs from
// the mask at hand: the bookings ahead between the two prefixes, and
// those either job is a member of.
func (bk *bookings) apply(ix *index, j *Job, now time.Time, into bool) {
	mem := bk.memberOf(j.User, j.Booking)
	// The bookings ahead it would run into are the first p by start.
	p, _ := slices.BinarySearch(bk.aheadAt, addRel(0, runFor(j)))
	if into && mayRunInto(j.Class) {
		// It may run into those whose notice (start minus its grace) is
		// still ahead.
		q, _ := slices.BinarySearch(bk.aheadAt, addRel(int64(j.Grace), 1))
		p = min(p, q)
	}
	old, oldP := bk.curMem, bk.curP
	same := len(old) == len(mem) && (len(mem) == 0 || &old[0] == &mem[0])
	bk.curMem, bk.curP = mem, p
	if !same {
		for _, i := range old {
			bk.inMem[i] = false
		}
		for _, i := range mem {
			bk.inMem[i] = true
		}
	}
	cut := bk.aheadAt0(p)
	fix := func(i int) {
		want := bk.endAt[i] > 0 && !bk.inMem[i] && bk.startAt[i] < cut
		if want != bk.on[i] {
			bk.set(ix, i, want)
		}
	}
	for _, i := range bk.ahead[min(p, oldP):max(p, oldP)] {
		fix(i)
	}
	if !same {
		for _, i := range old {
			fix(i)
		}
		for _, i := range mem {
			fix(i)
		}
	}
}

// aheadAt0 is the start of the p-th booking ahead (math.MaxInt64 past the
// last): a booking blocks when it starts before it (active ones start at
// or before 0).
func (bk *bookings) aheadAt0(p int) int64 {
	if p < len(bk.aheadAt) {
		return bk.aheadAt[p]
	}
	return neverRel
}

// init sets the first mask: every booking in its window blocks.
func (bk *bookings) init(ix *index) {
	for i := range bk.list {
		if bk.active[i] {
			bk.set(ix, i, true)
		}
	}
}

func (bk *bookings) set(ix *index, i int, on bool) {
	bk.on[i] = on
	d := int16(-1)
	if on {
		d = 1
	}
	for _, p := range bk.gpus[i] {
		ix.block(int(p.n), int(p.g), d)
	}
}

// prepare sets the index's blocked GPUs for job j before it is placed.
func (c *cycle) prepare(j *Job) {
	if c.bk != nil {
		c.bk.apply(c.ix, j, c.now, false)
	}
}

// startBooked handles a job that names a booking: it starts on the
// booking's GPUs in its window, or waits with the reason.
func (c *cycle) startBooked(j *Job) bool {
	i, ok := -1, false
	if c.bk != nil {
		i, ok = c.bk.byName[j.Booking]
	}
	if !ok {
		c.pend(Pending{JobID: j.ID, Reason: ReasonBooking,
			note: textNote(fmt.Sprintf("booking %s is not in effect: it ended, was released or does not exist", j.Booking))})
		return false
	}
	b := c.bk.list[i]
	switch {
	case b.Maint:
		c.pend(Pending{JobID: j.ID, Reason: ReasonBooking, note: textNote(fmt.Sprintf("booking %s is for maintenance: no job runs in it", b.Name))})
		return false
	case !slices.Contains(b.Users, j.User):
		c.pend(Pending{JobID: j.ID, Reason: ReasonBooking, note: textNote(fmt.Sprintf("user %s is not one of booking %s's users", j.User, b.Name))})
		return false
	case c.now.Before(b.Start):
		c.pend(Pending{JobID: j.ID, Reason: ReasonBooking, EstimatedStart: b.Start,
			note: textNote(fmt.Sprintf("waiting for booking %s, which starts at %s", b.Name, clock(b.Start, c.now)))})
		return false
	}
	if c.startIn(j, i) {
		return true
	}
	c.pend(Pending{JobID: j.ID, Reason: ReasonResources,
		note: textNote(fmt.Sprintf("needs %s on %d node(s) of booking %s; not that many of its GPUs are free", describe(descOf(j)), nodesWanted(j), b.Name))})
	return false
}

// startIn starts the job on booking i's GPUs if enough are available (the
// index's mask is j's); the start is recorded as in the booking.
func (c *cycle) startIn(j *Job, i int) bool {
	want := nodesWanted(j)
	free := 0
	for _, g := range c.bk.gpus[i] {
		if c.ix.nodes[g.n].avail(int(g.g)) {
			free++
		}
	}
	if free < want*j.GPUs {
		return false
	}
	var ps []Placement
	for k := 0; k < len(c.bk.gpus[i]) && len(ps) < want; {
		n := c.bk.gpus[i][k].n
		ns := &c.ix.nodes[n]
		p := Placement{NodeID: ns.node.ID, GPUs: []int{}}
		for ; k < len(c.bk.gpus[i]) && c.bk.gpus[i][k].n == n; k++ {
			g := int(c.bk.gpus[i][k].g)
			if len(p.GPUs) < j.GPUs && ns.avail(g) && matches(&ns.node.GPUs[g], j) {
				p.GPUs = append(p.GPUs, ns.node.GPUs[g].Index)
			}
		}
		if ns.node.Schedulable && c.ix.labelsOK(int(n), j) && len(p.GPUs) == j.GPUs && !c.placedIn(ps, p.NodeID) {
			ps = append(ps, p)
		}
	}
	if len(ps) < want {
		return false
	}
	c.ix.take(ps)
	c.record(j, ps, false)
	c.out.Starts[len(c.out.Starts)-1].Booking = c.bk.list[i].Name
	return true
}

func (c *cycle) placedIn(ps []Placement, node string) bool {
	return slices.ContainsFunc(ps, func(p Placement) bool { return p.NodeID == node })
}

// landMagnetic starts a job of a magnetic booking's user, that named no
// booking, in that booking's window when it fits there.
func (c *cycle) landMagnetic(j *Job) bool {
	if c.bk == nil || j.Booking != "" {
		return false
	}
	if len(c.bk.magnet) == 0 {
		return false
	}
	for _, i := range c.bk.memberOf(j.User, "") { // its magnetic bookings
		if c.bk.active[i] && c.startIn(j, i) {
			return true
		}
	}
	return false
}

// startInto starts a preemptible job that fits nowhere else on GPUs
// booked ahead (it gets its notice before the window), then puts back
// the job's strict mask when it did not start.
func (c *cycle) startInto(j *Job, sh *shapeState, borrowed bool) bool {
	if c.bk == nil || !mayRunInto(j.Class) {
		return false
	}
	c.bk.apply(c.ix, j, c.now, true)
	if c.start(j, sh, borrowed) { // sh keyed by the index version: a changed mask is a new version
		return true
	}
	c.bk.apply(c.ix, j, c.now, false)
	return false
}

// explainBooked turns the last pending entry, the job's, from "not enough
// GPUs" into ReasonBooking with the sentence naming the booking, when the
// job would fit but for the bookings that keep it out.
func (c *cycle) explainBooked(j *Job, sh *shapeState) {
	if c.bk == nil || len(c.out.Pending) == 0 {
		return
	}
	last := &c.out.Pending[len(c.out.Pending)-1]
	if last.JobID != j.ID || last.Reason != ReasonResources {
		return
	}
	if n := c.whyBooked(j, sh); n != nil {
		last.Reason, last.note = ReasonBooking, note{kind: noteText, src: n}
	}
}

// whyBooked returns the sentence of the first booking (by start) that
// keeps the job off GPUs it would otherwise fit on now; nil when the
// bookings are not why it waits. Remembered per job shape while the
// index stays the same.
func (c *cycle) whyBooked(j *Job, sh *shapeState) *noteSrc {
	v := c.ix.version
	if sh.bookAt == v+1 {
		return sh.bookNote
	}
	var lifted []int
	for i, on := range c.bk.on {
		if on {
			lifted = append(lifted, i)
			c.bk.set(c.ix, i, false)
		}
	}
	var n *noteSrc
	if len(lifted) > 0 {
		own := c.res != nil && c.res.jobID == j.ID
		if own {
			c.ix.give(c.res.held) // the GPUs held for it are its own
		}
		if ps, ok := c.ix.find(j, c.p.Spread); ok {
			n = c.bk.noteFor(c.firstOn(lifted, ps), c.now)
		}
		if own {
			c.ix.take(c.res.held)
		}
		for _, i := range lifted {
			c.bk.set(c.ix, i, true)
		}
		c.ix.version = v // the same GPUs are available as before
	}
	sh.bookAt, sh.bookNote = v+1, n
	return n
}

// firstOn returns the first of the bookings whose GPUs the placements
// use (the first of them when none does).
func (c *cycle) firstOn(bs []int, ps []Placement) int {
	for _, i := range bs {
		for _, g := range c.bk.gpus[i] {
			ns := &c.ix.nodes[g.n]
			idx := ns.node.GPUs[g.g].Index
			for _, p := range ps {
				if p.NodeID == ns.node.ID && slices.Contains(p.GPUs, idx) {
					return i
				}
			}
		}
	}
	return bs[0]
}

// noteFor is booking i's sentence: "GPUs 0-7 on node-1 are booked by
// vision 09:00-17:00 UTC".
func (bk *bookings) noteFor(i int, now time.Time) *noteSrc {
	if bk.notes[i] == nil {
		bk.notes[i] = &noteSrc{text: BookedText(bk.list[i], now)}
	}
	return bk.notes[i]
}

// BookedText says which GPUs a booking holds, for whom and when, e.g.
// "GPUs 0-7 on node-1 are booked by vision 09:00-17:00 UTC": by its
// project, else its first user; times as clock says them.
func BookedText(b *Booking, now time.Time) string {
	var parts []string
	for k, p := range b.Placements {
		if k == 3 {
			parts = append(parts, fmt.Sprintf("%d more nodes", len(b.Placements)-k))
			break
		}
		parts = append(parts, gpuList(p.GPUs)+" on "+p.NodeID)
	}
	who := b.Project
	if who == "" && len(b.Users) > 0 {
		who = b.Users[0]
	}
	if who == "" {
		who = b.Name
	}
	verb := "are"
	if len(b.Placements) == 1 && len(b.Placements[0].GPUs) == 1 {
		verb = "is"
	}
	what := "booked by " + who
	if b.Maint {
		what = "booked for maintenance (" + b.Name + ")"
	}
	return fmt.Sprintf("%s %s %s %s", strings.Join(parts, " and "), verb, what, span(b.Start, b.End, now))
}

// span says an interval as clock does its times: "09:00-17:00 UTC", with
// dates when not within a day of now.
func span(from, to, now time.Time) string {
	f := func(t time.Time) string {
		t = t.UTC()
		if t.Sub(now) < 20*time.Hour {
			return t.Format("15:04")
		}
		return t.Format("Jan 2 15:04")
	}
	return f(from) + "-" + f(to) + " UTC"
}

// gpuList says GPU indexes as ranges: "GPU 3", "GPUs 0-3,6".
func gpuList(idx []int) string {
	s := slices.Sorted(slices.Values(idx))
	var b strings.Builder
	for k := 0; k < len(s); {
		e := k
		for e+1 < len(s) && s[e+1] == s[e]+1 {
			e++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if e > k {
			fmt.Fprintf(&b, "%d-%d", s[k], s[e])
		} else {
			fmt.Fprintf(&b, "%d", s[k])
		}
		k = e + 1
	}
	if len(s) == 1 {
		return "GPU " + b.String()
	}
	return "GPUs " + b.String()
}

// bookingStops decides, before the queue is walked, what the bookings ask
// of running jobs: a job on a booked GPU whose window starts within its
// grace (or has started) and that does not belong in it is preempted; a
// job in a booking whose window has ended is expired unless the booking
// is flex. Jobs so stopped are no victims of the cycle.
func (c *cycle) bookingStops() {
	if c.bk == nil {
		return
	}
	for ri := range c.s.Running {
		r := &c.s.Running[ri]
		if r.Preempting {
			continue
		}
		done := false
		for _, p := range r.Placements {
			for _, i := range c.bk.nodes[p.NodeID] {
				if done {
					break
				}
				b := c.bk.list[i]
				if !overlapsOn(b, p) {
					continue
				}
				switch {
				case !c.now.Before(b.End):
					// Its own booking's, or a magnetic one's it is a member of.
					in := r.Booking == b.Name || r.Booking == "" && b.Magnetic && member(b, r.User, "")
					if in && !b.Flex && r.StartedAt.Before(b.End) {
						c.out.Expired = append(c.out.Expired, Expiry{JobID: r.ID, Booking: b.Name,
							Message: fmt.Sprintf("its booking %s ended at %s", b.Name, clock(b.End, c.now))})
						done = true
					}
				case !c.now.Before(b.Start.Add(-r.Grace)) && !member(b, r.User, r.Booking):
					c.out.Preemptions = append(c.out.Preemptions, Preemption{JobID: r.ID, Reason: ReasonBookingPreemption,
						Message: BookedText(b, c.now)})
					done = true
				}
			}
		}
		if done {
			c.open[ri] = false // no victim of this cycle's preemptions
			c.victim[ri] = true
		}
	}
}

// overlapsOn reports whether placement p uses a GPU of booking b.
func overlapsOn(b *Booking, p Placement) bool {
	for _, q := range b.Placements {
		if q.NodeID != p.NodeID {
			continue
		}
		for _, g := range p.GPUs {
			if slices.Contains(q.GPUs, g) {
				return true
			}
		}
	}
	return false
}
