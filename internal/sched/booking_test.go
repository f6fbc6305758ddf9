package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// vis is a booking of GPUs 0-3 on n1 for ana (project vision), from an
// hour after t0 for eight hours.
func vis(mod ...func(*Booking)) Booking {
	b := Booking{Name: "vis", Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3}}},
		Start: t0.Add(time.Hour), End: t0.Add(9 * time.Hour), Users: []string{"ana"}, Project: "vision"}
	for _, m := range mod {
		m(&b)
	}
	return b
}

func bjob(id, user string, gpus int, est time.Duration, mod ...func(*Job)) Job {
	j := Job{ID: id, User: user, Priority: 2, GPUs: gpus, SubmittedAt: t0, Estimate: est, EstimateGiven: true}
	for _, m := range mod {
		m(&j)
	}
	return j
}

func inRes(name string) func(*Job)     { return func(j *Job) { j.Booking = name } }
func ofClass(c string) func(*Job)      { return func(j *Job) { j.Class = c } }
func limit(d time.Duration) func(*Job) { return func(j *Job) { j.TimeLimit = d } }

// blocks is the rule bookings.apply implements, said plainly: whether
// booking b keeps job j off its GPUs if j started now. into: j may run
// into a booking ahead (see mayRunInto) when its notice would come after
// now. TestBookingProperties holds the cycle to it.
func blocks(b *Booking, j *Job, now time.Time, into bool) bool {
	switch {
	case !now.Before(b.End):
		return false
	case member(b, j.User, j.Booking):
		return false
	case !now.Before(b.Start): // in its window
		return true
	case !now.Add(runFor(j)).After(b.Start): // ends before the window
		return false
	}
	return !(into && mayRunInto(j.Class) && now.Before(b.Start.Add(-j.Grace)))
}

func startOf(r Result, id string) (Start, bool) {
	for _, s := range r.Starts {
		if s.JobID == id {
			return s, true
		}
	}
	return Start{}, false
}

func pendingOf(r Result, id string) (Pending, bool) {
	for _, p := range r.Pending {
		if p.JobID == id {
			return p, true
		}
	}
	return Pending{}, false
}

func TestBookings(t *testing.T) {
	one := []Node{node("n1", 8, "H100", 80)}
	tests := map[string]struct {
		now      time.Time
		bookings []Booking
		queue    []Job
		// want: job -> GPUs on n1 it starts on ("" GPUs: not started)
		starts  map[string][]int
		inBook  map[string]string // job -> the Start's Reservation
		reasons map[string]string
		message map[string]string
		estAt   map[string]time.Time
	}{
		"a long job is kept off GPUs booked an hour ahead, a short one runs beside": {
			now: t0, bookings: []Booking{vis()},
			queue:   []Job{bjob("long", "bo", 8, 3*time.Hour, ofClass(ClassInteractive)), bjob("short", "bo", 4, 30*time.Minute, ofClass(ClassInteractive))},
			starts:  map[string][]int{"short": {0, 1, 2, 3}},
			reasons: map[string]string{"long": ReasonBooking},
			message: map[string]string{"long": "GPUs 0-3 on n1 are booked by vision 10:00-18:00 UTC"},
		},
		"a time limit, not the estimate, is weighed when the job has one": {
			now: t0, bookings: []Booking{vis()},
			queue:   []Job{bjob("limited", "bo", 8, 10*time.Minute, ofClass(ClassInteractive), limit(2*time.Hour))},
			reasons: map[string]string{"limited": ReasonBooking},
		},
		"a long job takes the unbooked GPUs first": {
			now: t0, bookings: []Booking{vis()},
			queue:  []Job{bjob("long", "bo", 4, 3*time.Hour)},
			starts: map[string][]int{"long": {4, 5, 6, 7}},
		},
		"preemptible work runs into a booking when nothing else fits": {
			now: t0, bookings: []Booking{vis()},
			queue:  []Job{bjob("batch", "bo", 8, 3*time.Hour, ofClass(ClassPreemptible))},
			starts: map[string][]int{"batch": {0, 1, 2, 3, 4, 5, 6, 7}},
		},
		"plain batch work is kept off a booking it would run into": {
			now: t0, bookings: []Booking{vis()},
			queue:   []Job{bjob("batch", "bo", 8, 3*time.Hour, ofClass(ClassBatch))},
			reasons: map[string]string{"batch": ReasonBooking},
		},
		"preemptible work does not start where its notice would be due already": {
			now: t0.Add(time.Hour - time.Minute), bookings: []Booking{vis()},
			queue:   []Job{bjob("batch", "bo", 8, 3*time.Hour, ofClass(ClassPreemptible), func(j *Job) { j.Grace = 2 * time.Minute })},
			reasons: map[string]string{"batch": ReasonBooking},
		},
		"in the window only the booking's jobs use its GPUs": {
			now: t0.Add(2 * time.Hour), bookings: []Booking{vis()},
			queue:   []Job{bjob("bo6", "bo", 6, time.Hour, func(j *Job) { j.SubmittedAt = t0.Add(-time.Minute) }), bjob("bo4", "bo", 4, time.Hour), bjob("ana", "ana", 4, time.Hour, inRes("vis"))},
			starts:  map[string][]int{"bo4": {4, 5, 6, 7}, "ana": {0, 1, 2, 3}},
			inBook:  map[string]string{"ana": "vis", "bo4": ""},
			reasons: map[string]string{"bo6": ReasonBooking},
		},
		"a job of the booking waits for its window": {
			now: t0, bookings: []Booking{vis()},
			queue:   []Job{bjob("ana", "ana", 2, time.Hour, inRes("vis"))},
			reasons: map[string]string{"ana": ReasonBooking},
			message: map[string]string{"ana": "waiting for booking vis, which starts at 10:00 UTC"},
			estAt:   map[string]time.Time{"ana": t0.Add(time.Hour)},
		},
		"a job of the booking runs only on its GPUs": {
			now: t0.Add(2 * time.Hour), bookings: []Booking{vis()},
			queue:   []Job{bjob("ana", "ana", 6, time.Hour, inRes("vis"))},
			reasons: map[string]string{"ana": ReasonResources},
		},
		"someone else naming the booking waits": {
			now: t0.Add(2 * time.Hour), bookings: []Booking{vis()},
			queue:   []Job{bjob("bo", "bo", 2, time.Hour, inRes("vis"))},
			reasons: map[string]string{"bo": ReasonBooking},
			message: map[string]string{"bo": "user bo is not one of booking vis's users"},
		},
		"a booking that is gone": {
			now: t0, queue: []Job{bjob("ana", "ana", 2, time.Hour, inRes("nope"))},
			reasons: map[string]string{"ana": ReasonBooking},
		},
		"without magnetic the booked user's plain job stays off": {
			now: t0.Add(2 * time.Hour), bookings: []Booking{vis()},
			queue:   []Job{bjob("ana", "ana", 6, time.Hour)},
			reasons: map[string]string{"ana": ReasonBooking},
		},
		"magnetic: the booked user's plain job lands in it": {
			now: t0.Add(2 * time.Hour), bookings: []Booking{vis(func(b *Booking) { b.Magnetic = true })},
			queue:  []Job{bjob("ana", "ana", 2, time.Hour), bjob("bo", "bo", 2, time.Hour)},
			starts: map[string][]int{"ana": {0, 1}, "bo": {4, 5}},
			inBook: map[string]string{"ana": "vis", "bo": ""},
		},
		"maint: nobody's jobs": {
			now: t0.Add(2 * time.Hour), bookings: []Booking{vis(func(b *Booking) { b.Maint = true })},
			queue:   []Job{bjob("ana", "ana", 2, time.Hour, inRes("vis")), bjob("bo", "bo", 6, time.Hour)},
			reasons: map[string]string{"ana": ReasonBooking, "bo": ReasonBooking},
		},
		"after the window the GPUs are everyone's": {
			now: t0.Add(9 * time.Hour), bookings: []Booking{vis()},
			queue:  []Job{bjob("bo", "bo", 8, time.Hour)},
			starts: map[string][]int{"bo": {0, 1, 2, 3, 4, 5, 6, 7}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Snapshot{Now: tc.now, Nodes: one, Queue: tc.queue, Bookings: tc.bookings,
				Policy: Policy{Name: PolicyFCFS, Backfill: true}}
			r := Schedule(s)
			for _, j := range tc.queue {
				st, started := startOf(r, j.ID)
				want, wantStart := tc.starts[j.ID]
				if started != wantStart {
					p, _ := pendingOf(r, j.ID)
					t.Fatalf("%s started = %v, want %v (pending %s: %s)", j.ID, started, wantStart, p.Reason, p.Message())
				}
				if started && !slices.Equal(st.Placements[0].GPUs, want) {
					t.Errorf("%s on GPUs %v, want %v", j.ID, st.Placements[0].GPUs, want)
				}
				if b, ok := tc.inBook[j.ID]; ok && st.Booking != b {
					t.Errorf("%s started in booking %q, want %q", j.ID, st.Booking, b)
				}
			}
			for id, want := range tc.reasons {
				p, _ := pendingOf(r, id)
				if p.Reason != want {
					t.Errorf("%s reason %q (%s), want %q", id, p.Reason, p.Message(), want)
				}
			}
			for id, want := range tc.message {
				if p, _ := pendingOf(r, id); p.Message() != want {
					t.Errorf("%s message %q, want %q", id, p.Message(), want)
				}
			}
			plan := EstimateStarts(s, r, DefaultPlanDepth)
			for id, want := range tc.estAt {
				if !plan[id].Equal(want) {
					t.Errorf("%s estimated start %v, want %v", id, plan[id], want)
				}
			}
		})
	}
}

// TestBookingStops: running jobs are told to leave booked GPUs at the
// window's start minus their grace, and jobs in a booking are expired at
// its end unless it is flex.
func TestBookingStops(t *testing.T) {
	n1 := node("n1", 8, "H100", 80, 0, 1, 2, 3)
	run := func(id, user, res string) Running {
		return Running{ID: id, User: user, Priority: 2, StartedAt: t0.Add(-time.Hour), Estimate: 10 * time.Hour,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3}}}, Booking: res, Grace: 5 * time.Minute}
	}
	tests := map[string]struct {
		now     time.Time
		booking Booking
		running Running
		preempt bool
		expire  bool
	}{
		"before its notice":           {now: t0.Add(54 * time.Minute), booking: vis(), running: run("r", "bo", "")},
		"at the start minus grace":    {now: t0.Add(55 * time.Minute), booking: vis(), running: run("r", "bo", ""), preempt: true},
		"in the window, not a member": {now: t0.Add(2 * time.Hour), booking: vis(), running: run("r", "bo", ""), preempt: true},
		"the booking's own job stays": {now: t0.Add(2 * time.Hour), booking: vis(), running: run("r", "ana", "vis")},
		"magnetic: the user's plain job stays": {now: t0.Add(2 * time.Hour), booking: vis(func(b *Booking) { b.Magnetic = true }),
			running: run("r", "ana", "")},
		"maint: even its user's job goes": {now: t0.Add(2 * time.Hour), booking: vis(func(b *Booking) { b.Maint = true }),
			running: run("r", "ana", "vis"), preempt: true},
		"at the end: expired": {now: t0.Add(9 * time.Hour), booking: vis(), running: run("r", "ana", "vis"), expire: true},
		"at the end, magnetic: its user's plain job expires": {now: t0.Add(9 * time.Hour), booking: vis(func(b *Booking) { b.Magnetic = true }),
			running: run("r", "ana", ""), expire: true},
		"a job that started after the end is not expired": {now: t0.Add(10 * time.Hour), booking: vis(func(b *Booking) { b.Magnetic = true }),
			running: func() Running { r := run("r", "ana", ""); r.StartedAt = t0.Add(9 * time.Hour); return r }()},
		"at the end, flex: stays":        {now: t0.Add(9 * time.Hour), booking: vis(func(b *Booking) { b.Flex = true }), running: run("r", "ana", "vis")},
		"just before the end":            {now: t0.Add(9*time.Hour - time.Second), booking: vis(), running: run("r", "ana", "vis")},
		"a job elsewhere is not expired": {now: t0.Add(9 * time.Hour), booking: vis(), running: run("r", "bo", "")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: tc.now, Nodes: []Node{n1}, Running: []Running{tc.running}, Bookings: []Booking{tc.booking},
				Policy: Policy{Name: PolicyFCFS, Backfill: true, Preemption: true}})
			preempted := len(r.Preemptions) == 1 && r.Preemptions[0].JobID == "r" && r.Preemptions[0].Reason == ReasonBookingPreemption
			if preempted != tc.preempt || len(r.Preemptions) > 1 {
				t.Fatalf("preemptions %+v, want preempted %v", r.Preemptions, tc.preempt)
			}
			if preempted && !strings.Contains(r.Preemptions[0].Message, "GPUs 0-3 on n1 are booked") {
				t.Errorf("message %q", r.Preemptions[0].Message)
			}
			expired := len(r.Expired) == 1 && r.Expired[0].JobID == "r" && r.Expired[0].Booking == "vis"
			if expired != tc.expire || len(r.Expired) > 1 {
				t.Fatalf("expired %+v, want %v", r.Expired, tc.expire)
			}
		})
	}
}

func TestBookedText(t *testing.T) {
	b := vis()
	if got, want := BookedText(&b, t0), "GPUs 0-3 on n1 are booked by vision 10:00-18:00 UTC"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	b.Project, b.Placements = "", []Placement{{NodeID: "n1", GPUs: []int{5}}, {NodeID: "n2", GPUs: []int{0, 1, 3}}}
	if got, want := BookedText(&b, t0), "GPU 5 on n1 and GPUs 0-1,3 on n2 are booked by ana 10:00-18:00 UTC"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestBookingProperties: over random snapshots with random bookings, no
// job ever starts on a booked GPU in a window it does not belong to, nor
// before a window it would run into unless it is preemptible work whose
// notice is still ahead; a job of a booking starts only on its GPUs.
func TestBookingProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	users := []string{"ana", "bob", "cy", "dee"}
	for iter := range 3000 {
		s := randomSnapshot(rng)
		var names []string
		for k := range rng.IntN(5) {
			if len(s.Nodes) == 0 {
				break
			}
			nd := &s.Nodes[rng.IntN(len(s.Nodes))]
			var gpus []int
			for _, g := range nd.GPUs {
				if rng.IntN(2) == 0 {
					gpus = append(gpus, g.Index)
				}
			}
			start := s.Now.Add(time.Duration(rng.IntN(600)-300) * time.Minute)
			b := Booking{Name: fmt.Sprintf("b%d", k), Placements: []Placement{{NodeID: nd.ID, GPUs: gpus}},
				Start: start, End: start.Add(time.Duration(1+rng.IntN(600)) * time.Minute),
				Users: []string{users[rng.IntN(4)]}, Magnetic: rng.IntN(3) == 0, Maint: rng.IntN(6) == 0, Flex: rng.IntN(3) == 0}
			s.Bookings = append(s.Bookings, b)
			names = append(names, b.Name)
		}
		for i := range s.Queue {
			j := &s.Queue[i]
			if len(names) > 0 && rng.IntN(4) == 0 {
				j.Booking = names[rng.IntN(len(names))]
			}
			j.Class = []string{"", ClassBatch, ClassPreemptible, ClassInteractive, ClassInteractivePreemptible}[rng.IntN(5)]
			if rng.IntN(3) == 0 {
				j.TimeLimit = time.Duration(1+rng.IntN(300)) * time.Minute
			}
			j.Grace = time.Duration(rng.IntN(10)) * time.Minute
		}
		for i := range s.Running {
			if len(names) > 0 && rng.IntN(3) == 0 {
				s.Running[i].Booking = names[rng.IntN(len(names))]
			}
			s.Running[i].Grace = time.Duration(rng.IntN(10)) * time.Minute
		}
		r := Schedule(s)
		// A job is told to leave only GPUs of a booking it does not belong
		// in, whose window starts within its grace; expired only from its
		// own booking, ended and not flex.
		running := map[string]*Running{}
		for i := range s.Running {
			running[s.Running[i].ID] = &s.Running[i]
		}
		seen := map[string]bool{}
		for _, p := range r.Preemptions {
			if seen[p.JobID] {
				t.Fatalf("iteration %d: %s preempted twice: %+v", iter, p.JobID, r.Preemptions)
			}
			seen[p.JobID] = true
			if p.Reason != ReasonBookingPreemption {
				continue
			}
			v := running[p.JobID]
			ok := false
			for bi := range s.Bookings {
				b := &s.Bookings[bi]
				for _, pl := range v.Placements {
					if overlapsOn(b, pl) && s.Now.Before(b.End) && !s.Now.Before(b.Start.Add(-v.Grace)) && !member(b, v.User, v.Booking) {
						ok = true
					}
				}
			}
			if !ok || v.Preempting {
				t.Fatalf("iteration %d: %+v preempted for a booking: %+v", iter, *v, p)
			}
		}
		for _, e := range r.Expired {
			v := running[e.JobID]
			ok := false
			for bi := range s.Bookings {
				b := &s.Bookings[bi]
				in := b.Name == v.Booking || v.Booking == "" && b.Magnetic && member(b, v.User, "")
				ok = ok || in && v.StartedAt.Before(b.End) && b.Name == e.Booking && !b.Flex && !s.Now.Before(b.End)
			}
			if !ok {
				t.Fatalf("iteration %d: %+v expired: %+v", iter, *v, e)
			}
		}
		jobs := map[string]*Job{}
		for i := range s.Queue {
			jobs[s.Queue[i].ID] = &s.Queue[i]
		}
		for _, st := range r.Starts {
			j := jobs[st.JobID]
			for bi := range s.Bookings {
				b := &s.Bookings[bi]
				for _, p := range st.Placements {
					if !overlapsOn(b, p) {
						continue
					}
					if blocks(b, j, s.Now, true) {
						t.Fatalf("iteration %d: job %+v started on %v, booked by %+v", iter, *j, st.Placements, *b)
					}
				}
			}
			if j.Booking != "" {
				if st.Booking != j.Booking {
					t.Fatalf("iteration %d: job %s of booking %s started as %q", iter, j.ID, j.Booking, st.Booking)
				}
				var b *Booking
				for bi := range s.Bookings {
					if s.Bookings[bi].Name == j.Booking {
						b = &s.Bookings[bi]
					}
				}
				for _, p := range st.Placements {
					for _, g := range p.GPUs {
						if !overlapsOn(b, Placement{NodeID: p.NodeID, GPUs: []int{g}}) {
							t.Fatalf("iteration %d: job %s of booking %s on GPU %d of %s outside it", iter, j.ID, b.Name, g, p.NodeID)
						}
					}
				}
			}
		}
	}
}

// bookedSnapshot is benchSnapshot (1,000 nodes x 8 GPUs, 10,000 queued
// jobs) with n bookings of a whole node each: the first half in their
// window (users user0 and user1, every third magnetic), the others
// starting 10 minutes to 16 hours ahead; every tenth queued job names a
// booking.
func bookedSnapshot(n int, p Policy) Snapshot {
	s := benchSnapshot(10000, p)
	for k := range n {
		nd := &s.Nodes[(k*7)%len(s.Nodes)]
		b := Booking{Name: fmt.Sprintf("b%03d", k), Placements: []Placement{{NodeID: nd.ID, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}},
			Users: []string{"user0", "user1"}, Project: "p", Magnetic: k%3 == 0}
		if k < n/2 {
			b.Start, b.End = s.Now.Add(-time.Hour), s.Now.Add(time.Duration(1+k%8)*time.Hour)
		} else {
			b.Start = s.Now.Add(time.Duration(10+k*10) * time.Minute)
			b.End = b.Start.Add(8 * time.Hour)
		}
		s.Bookings = append(s.Bookings, b)
	}
	for i := range s.Queue {
		s.Queue[i].Estimate = time.Duration(1+i%240) * time.Minute
		if n > 0 && i%10 == 0 {
			s.Queue[i].Booking = s.Bookings[i%n].Name
		}
	}
	return s
}

// BenchmarkCycleBookings is BenchmarkCycle's cluster and queue with no
// bookings (the baseline) and with 100.
func BenchmarkCycleBookings(b *testing.B) {
	for _, n := range []int{0, 100} {
		for _, name := range []string{PolicyFairShare, PolicyFCFS} {
			b.Run(fmt.Sprintf("%s/bookings=%d", name, n), func(b *testing.B) {
				s := bookedSnapshot(n, Policy{Name: name, Backfill: true, Preemption: true, MinRunTime: 10 * time.Minute})
				b.ReportAllocs()
				starts := 0
				for b.Loop() {
					starts = len(Schedule(s).Starts)
				}
				b.ReportMetric(float64(starts), "starts")
			})
		}
	}
}

// BenchmarkEstimateStartsBookings plans the first DefaultPlanDepth
// waiting jobs, with no bookings and with 100.
func BenchmarkEstimateStartsBookings(b *testing.B) {
	for _, n := range []int{0, 100} {
		b.Run(fmt.Sprintf("bookings=%d", n), func(b *testing.B) {
			s := bookedSnapshot(n, Policy{Name: PolicyFairShare, Backfill: true})
			r := Schedule(s)
			for b.Loop() {
				EstimateStarts(s, r, DefaultPlanDepth)
			}
		})
	}
}

// TestBookingEstimates: a job of a booking is estimated to start at its
// window's start, or, in the window, when enough of its GPUs free up; a
// job that the booking keeps out, once the window has ended.
func TestBookingEstimates(t *testing.T) {
	now := t0.Add(2 * time.Hour) // in vis's window (10:00-18:00)
	n1 := node("n1", 8, "H100", 80, 0, 1)
	s := Snapshot{Now: now, Nodes: []Node{n1}, Bookings: []Booking{vis()}, Policy: Policy{Name: PolicyFCFS, Backfill: true},
		Running: []Running{{ID: "r", User: "ana", Priority: 2, StartedAt: now.Add(-30 * time.Minute), Estimate: 90 * time.Minute,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1}}}, Booking: "vis"}},
		Queue: []Job{bjob("ana", "ana", 4, time.Hour, inRes("vis")), bjob("bo", "bo", 6, time.Hour, func(j *Job) { j.SubmittedAt = t0.Add(time.Minute) })}}
	r := Schedule(s)
	plan := EstimateStarts(s, r, DefaultPlanDepth)
	if want := now.Add(time.Hour); !plan["ana"].Equal(want) {
		t.Errorf("ana's job of the booking estimated at %v, want %v (when the running job's GPUs free)", plan["ana"], want)
	}
	if want := t0.Add(9 * time.Hour); !plan["bo"].Equal(want) {
		t.Errorf("bo's 6-GPU job estimated at %v, want the window's end %v", plan["bo"], want)
	}
}
