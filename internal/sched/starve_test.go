package sched

import (
	"slices"
	"testing"
	"time"
)

// Under fair_share, starving jobs go before every other, oldest first;
// the rest keep the fair-share order.
func TestStarvingComeFirst(t *testing.T) {
	h := time.Hour
	heavy := Usage{Users: map[string]float64{"heavy": 1e7, "light": 0}, Projects: map[string]float64{"p": 0}}
	now := t0.Add(100 * h)
	tests := map[string]struct {
		policy Policy
		queue  []Job
		want   []string // the order of starts on a node with room for all
	}{
		"young jobs: fair share first": {
			policy: Policy{Name: PolicyFairShare, StarveAfter: 48 * h},
			queue:  jobs(mk("h1").user("heavy").at(90*h), mk("l1").user("light").at(95*h)),
			want:   []string{"l1", "h1"},
		},
		"a starving heavy user's job goes first": {
			policy: Policy{Name: PolicyFairShare, StarveAfter: 48 * h},
			queue:  jobs(mk("h1").user("heavy").at(10*h), mk("l1").user("light").at(95*h)),
			want:   []string{"h1", "l1"},
		},
		"starving jobs oldest first, across users": {
			policy: Policy{Name: PolicyFairShare, StarveAfter: 48 * h},
			queue: jobs(mk("l1").user("light").at(30*h), mk("h1").user("heavy").at(10*h),
				mk("h2").user("heavy").at(20*h), mk("l2").user("light").at(99*h)),
			want: []string{"h1", "h2", "l1", "l2"},
		},
		"negative StarveAfter: never": {
			policy: Policy{Name: PolicyFairShare, StarveAfter: -1},
			queue:  jobs(mk("h1").user("heavy").at(10*h), mk("l1").user("light").at(95*h)),
			want:   []string{"l1", "h1"},
		},
		"zero StarveAfter: the default": {
			policy: Policy{Name: PolicyFairShare},
			queue:  jobs(mk("h1").user("heavy").at(100*h-DefaultStarveAfter), mk("l1").user("light").at(95*h)),
			want:   []string{"h1", "l1"},
		},
		"other policies: no starving pass": {
			policy: Policy{Name: PolicySJF, StarveAfter: 48 * h},
			queue:  jobs(mk("h1").user("heavy").at(10*h).est(200*h), mk("l1").user("light").at(95*h).est(h)),
			want:   []string{"l1", "h1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: now, Nodes: []Node{node("n1", 8, "H100", 80)}, Queue: tc.queue,
				Usage: heavy, Policy: tc.policy})
			var got []string
			for _, s := range r.Starts {
				got = append(got, s.JobID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("starts %v, want %v", got, tc.want)
			}
		})
	}
}

// The first starving job that does not fit holds the reservation, even
// when a job of a lighter user does not fit either.
func TestStarvingJobIsTheHead(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	usage := Usage{Users: map[string]float64{"heavy": 1e7}, Projects: map[string]float64{}}
	running := []Running{run("r1", "x", 2, "n1", 99*h, 5*h, 0, 1, 2, 3, 4, 5, 6, 7)}
	queue := jobs(mk("big").user("heavy").gpus(8).at(10*h).est(h), mk("young").user("light").gpus(8).at(99*h).est(h))
	for _, tc := range []struct {
		after time.Duration
		head  string
	}{{48 * h, "big"}, {-1, "young"}} {
		r := Schedule(Snapshot{Now: now, Nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6, 7)}, Queue: queue, Running: running,
			Usage: usage, Policy: Policy{Name: PolicyFairShare, Backfill: true, StarveAfter: tc.after, ReserveAfter: -1}})
		if r.Head != tc.head {
			t.Errorf("StarveAfter %v: head %q, want %q", tc.after, r.Head, tc.head)
		}
	}
}

// A running job that would be starving once requeued is not preempted
// for a job that is not: it would take its GPUs straight back.
func TestStarvingVictimNotPreempted(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	usage := Usage{Users: map[string]float64{"heavy": 1e7}, Projects: map[string]float64{}}
	for _, tc := range []struct {
		victimSubmitted time.Duration
		want            bool
	}{{10 * h, false}, {90 * h, true}} {
		running := []Running{submitted(run("v", "heavy", 2, "n1", 95*h, 50*h, 0, 1, 2, 3, 4, 5, 6, 7), tc.victimSubmitted)}
		r := Schedule(Snapshot{Now: now, Nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6, 7)}, Running: running,
			Queue: jobs(mk("j").user("light").gpus(4).at(99 * h)), Usage: usage,
			Policy: Policy{Name: PolicyFairShare, Preemption: true, StarveAfter: 48 * h}})
		if got := len(r.Preemptions) > 0; got != tc.want {
			t.Errorf("victim submitted at %v: preempted %v, want %v", tc.victimSubmitted, got, tc.want)
		}
	}
}

// Under fair_share with backfill, the oldest job that cannot start holds
// the reservation, not the first of the walk; small jobs still start in
// the fair-share order where they cannot delay it.
func TestOldestJobIsTheHead(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	usage := Usage{Users: map[string]float64{"heavy": 1e7}, Projects: map[string]float64{}}
	nodes := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6, 7), node("n2", 8, "H100", 80, 0, 1, 2, 3, 4, 5)}
	running := []Running{run("r1", "x", 2, "n1", 99*h, 2*h, 0, 1, 2, 3, 4, 5, 6, 7), run("r2", "x", 2, "n2", 99*h, 5*h, 0, 1, 2, 3, 4, 5)}
	queue := jobs(mk("old").user("heavy").gpus(8).at(90*h).est(h), mk("young").user("light").gpus(8).at(99*h).est(h),
		mk("short").user("light").gpus(1).at(99*h).est(h/2), mk("long").user("light").gpus(1).at(99*h).est(3*h))
	for _, tc := range []struct {
		walkOrder bool
		head      string
		at        time.Duration // the reservation, after t0
		starts    []string
	}{
		{false, "old", 101 * h, []string{"long", "short"}}, // n2's free GPUs are not the head's: both fit there
		{true, "young", 101 * h, []string{"long", "short"}},
	} {
		r := Schedule(Snapshot{Now: now, Nodes: nodes, Queue: queue, Running: running, Usage: usage,
			Policy: Policy{Name: PolicyFairShare, Backfill: true, StarveAfter: -1, ReserveAfter: -1, OldestHead: !tc.walkOrder}})
		if r.Head != tc.head || !r.ReservedAt.Equal(t0.Add(tc.at)) || !slices.Equal(startIDs(r), tc.starts) {
			t.Errorf("walk order %v: head %q at %v, starts %v; want %q at %v, %v", tc.walkOrder, r.Head,
				r.ReservedAt.Sub(t0), startIDs(r), tc.head, tc.at, tc.starts)
		}
		for _, p := range r.Pending {
			if p.JobID == tc.head && !p.EstimatedStart.Equal(t0.Add(tc.at)) {
				t.Errorf("walk order %v: the head's estimated start %v, want %v", tc.walkOrder, p.EstimatedStart, t0.Add(tc.at))
			}
		}
	}
}

// Under fair_share with backfill, a job holds a reservation only once it
// has waited ReserveAfter; until then a later job may take the GPUs it
// would have held. (The long job is longer than this small cluster's
// backlog: the tail rule, off here, would start it first.)
func TestReserveAfter(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	nodes := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3)}
	running := []Running{run("r1", "x", 2, "n1", 99*h, 2*h, 0, 1, 2, 3)}
	for _, tc := range []struct {
		policy    string
		submitted time.Duration // the gang's submission, after t0
		after     time.Duration
		head      string
		starts    []string
	}{
		{PolicyFairShare, 99 * h, 2 * h, "", []string{"long"}},            // young: nothing held, the long job starts
		{PolicyFairShare, 97 * h, 2 * h, "gang", nil},                     // waited 3h: its GPUs are held
		{PolicyFairShare, 99 * h, -1, "gang", nil},                        // at once
		{PolicyFCFS, 99 * h, 2 * h, "gang", nil},                          // other policies: plain EASY
		{PolicyFairShare, 99*h + 30*time.Minute, 0, "", []string{"long"}}, // zero: the default, 2h
	} {
		queue := jobs(mk("gang").user("a").gpus(8).at(tc.submitted).est(h), mk("long").user("b").gpus(2).at(99*h).est(5*h))
		r := Schedule(Snapshot{Now: now, Nodes: nodes, Running: running, Queue: queue,
			Policy: Policy{Name: tc.policy, Backfill: true, StarveAfter: -1, ReserveAfter: tc.after, TailFactor: -1}})
		if r.Head != tc.head || !slices.Equal(startIDs(r), tc.starts) {
			t.Errorf("%s, gang submitted at %v, ReserveAfter %v: head %q, starts %v; want %q, %v", tc.policy, tc.submitted,
				tc.after, r.Head, startIDs(r), tc.head, tc.starts)
		}
	}
}

// Starving jobs go first only while the jobs that went first hold less
// than StarveShare of the GPUs; past it they wait their fair-share turn,
// but for the oldest under OldestFirst, which goes first whatever they
// hold (once it has waited OldestBacklog backlogs and OldestStretch times
// its estimate).
func TestStarveShare(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	usage := Usage{Users: map[string]float64{"heavy": 1e7}, Projects: map[string]float64{}}
	queue := jobs(mk("h1").user("heavy").at(10*h), mk("h2").user("heavy").at(11*h), mk("h3").user("heavy").at(12*h),
		mk("l1").user("light").at(99*h), mk("l2").user("light").at(99*h))
	// A running job that waited 60h before it started went first; its
	// 40h left on 2 of the 16 GPUs are the backlog: 5h. h1 has waited 90h,
	// 18 backlogs, 90 times its estimate.
	first := submitted(run("r", "heavy", 2, "n2", 90*h, 50*h, 0, 1), 30*h)
	for _, tc := range []struct {
		share            float64
		oldestFirst      bool
		backlog, stretch float64 // OldestBacklog, OldestStretch
		running          []Running
		want             []string
	}{
		{1, false, 0, 0, nil, []string{"h1", "h2", "h3", "l1", "l2"}},
		{0.125, false, 0, 0, nil, []string{"h1", "h2", "l1", "l2", "h3"}}, // 2 of 16 GPUs
		{0.125, true, 0, 0, []Running{first}, []string{"h1", "l1", "l2", "h2", "h3"}},
		{0.125, true, 10, 50, []Running{first}, []string{"h1", "l1", "l2", "h2", "h3"}},
		{0.125, true, 20, 0, []Running{first}, []string{"l1", "l2", "h1", "h2", "h3"}},  // 18 backlogs < 20
		{0.125, true, 0, 100, []Running{first}, []string{"l1", "l2", "h1", "h2", "h3"}}, // 90 estimates < 100
		{0.125, false, 0, 0, []Running{first}, []string{"l1", "l2", "h1", "h2", "h3"}},
		{0, false, 0, 0, nil, []string{"h1", "h2", "h3", "l1", "l2"}}, // the default, 1: all 16
	} {
		nodes := []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0, 1)}
		r := Schedule(Snapshot{Now: now, Nodes: nodes, Queue: queue, Running: tc.running, Usage: usage,
			Policy: Policy{Name: PolicyFairShare, StarveAfter: 48 * h, StarveShare: tc.share, OldestFirst: tc.oldestFirst,
				OldestBacklog: tc.backlog, OldestStretch: tc.stretch}})
		if got := startIDs(r); !slices.Equal(got, tc.want) {
			t.Errorf("share %v, oldest first %v (backlogs %v, stretch %v), %d running: starts %v, want %v",
				tc.share, tc.oldestFirst, tc.backlog, tc.stretch, len(tc.running), got, tc.want)
		}
	}
}

// With StarveBacklog a job starves only once it has also waited that many
// backlogs: the threshold grows with the work the cluster has to drain.
func TestStarveBacklog(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	usage := Usage{Users: map[string]float64{"heavy": 1e7}, Projects: map[string]float64{}}
	queue := jobs(mk("h1").user("heavy").at(50*h), mk("l1").user("light").at(99*h))
	// 320h left on 2 of the 16 GPUs: a backlog of 40h. h1 has waited 50h.
	running := []Running{run("r", "other", 2, "n2", 90*h, 330*h, 0, 1)}
	for _, tc := range []struct {
		backlogs float64
		want     []string
	}{
		{0, []string{"h1", "l1"}},   // 50h > StarveAfter (48h)
		{1, []string{"h1", "l1"}},   // 50h > 40h
		{1.5, []string{"l1", "h1"}}, // 50h < 60h: the fair-share order
		{0.1, []string{"h1", "l1"}}, // StarveAfter stays the floor
	} {
		nodes := []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0, 1)}
		got := ids(OrderWithUsage(Snapshot{Now: now, Nodes: nodes, Queue: queue, Running: running, Usage: usage,
			Policy: Policy{Name: PolicyFairShare, StarveAfter: 48 * h, StarveShare: 1, StarveBacklog: tc.backlogs,
				StarveLightShare: -1}}))
		if !slices.Equal(got, tc.want) {
			t.Errorf("starve after %v backlogs: order %v, want %v", tc.backlogs, got, tc.want)
		}
	}
	// The floor: with StarveAfter at 60h, 0.1 backlogs (4h) starves nothing.
	nodes := []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0, 1)}
	got := ids(OrderWithUsage(Snapshot{Now: now, Nodes: nodes, Queue: queue, Running: running, Usage: usage,
		Policy: Policy{Name: PolicyFairShare, StarveAfter: 60 * h, StarveShare: 1, StarveBacklog: 0.1, StarveLightShare: -1}}))
	if want := []string{"l1", "h1"}; !slices.Equal(got, want) {
		t.Errorf("starve after 60h or 0.1 backlogs: order %v, want %v", got, want)
	}
}

// At light load (the queued work drains within StarveLightDrain) a job
// that waited StarveAfter but not the backlog starves too, after those
// that waited both, while the jobs that went first hold less than
// StarveLightShare of the GPUs.
func TestStarveLight(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	usage := Usage{Users: map[string]float64{"heavy": 1e7, "mid": 1e6}, Projects: map[string]float64{}}
	// 640h left on 2 of the 16 GPUs: a backlog of 80h, but nothing queued
	// to drain. h1 has waited 90h (one backlog), m1 50h (StarveAfter
	// only), l1 1h.
	queue := jobs(mk("h1").user("heavy").at(10*h), mk("m1").user("mid").at(50*h), mk("l1").user("light").at(99*h))
	long := run("r", "other", 2, "n2", 90*h, 650*h, 0, 1)
	// A running job that went first for starving (it waited 60h) holds 4
	// of the 16 GPUs: a quarter (a share of 0.45 allows 7, room for h1 and m1 too; 0.25 allows 4).
	first := submitted(run("s", "other", 4, "n2", 90*h, 20*h, 2, 3, 4, 5), 30*h)
	for _, tc := range []struct {
		name    string
		share   float64
		drain   time.Duration
		running []Running
		want    []string
	}{
		{"the defaults", 0, 0, []Running{long}, []string{"h1", "m1", "l1"}},
		{"off", -1, 0, []Running{long}, []string{"h1", "l1", "m1"}},
		{"drain over the bound", 0, -1, []Running{long}, []string{"h1", "l1", "m1"}},
		{"under the share", 0.45, 0, []Running{long, first}, []string{"h1", "m1", "l1"}},
		{"past the share", 0.25, 0, []Running{long, first}, []string{"h1", "l1", "m1"}},
	} {
		nodes := []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0, 1, 2, 3, 4, 5)}
		got := ids(OrderWithUsage(Snapshot{Now: now, Nodes: nodes, Queue: queue, Running: tc.running, Usage: usage,
			Policy: Policy{Name: PolicyFairShare, StarveAfter: 48 * h, StarveShare: 1, StarveLightShare: tc.share,
				StarveLightDrain: tc.drain}}))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: order %v, want %v", tc.name, got, tc.want)
		}
	}
}

// DrainTime counts a running job only for as long as the queue takes to
// drain, where Backlog counts all its time left.
func TestDrainTime(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	for _, tc := range []struct {
		name          string
		queue         []Job
		running       []Running
		drain, backlg time.Duration
	}{
		{"nothing", nil, nil, 0, 0},
		{"queue alone", jobs(mk("a").gpus(8).est(10 * h)), nil, 5 * h, 5 * h},
		{"a long job beside a short queue", jobs(mk("a").gpus(8).est(10 * h)),
			[]Running{run("r", "u", 8, "n1", 90*h, 330*h, 0, 1, 2, 3, 4, 5, 6, 7)}, 10 * h, 165 * h},
		{"every GPU held until 2h", jobs(mk("a").gpus(8).est(4 * h)),
			[]Running{run("r", "u", 16, "n1", 90*h, 12*h, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)}, 4 * h, 4 * h},
	} {
		s := &Snapshot{Now: now, Nodes: []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80)},
			Queue: tc.queue, Running: tc.running}
		if got, ok := DrainTime(s); !ok || got != tc.drain {
			t.Errorf("%s: drain time %v (%v), want %v", tc.name, got, ok, tc.drain)
		}
		if got, _ := Backlog(s); got != tc.backlg {
			t.Errorf("%s: backlog %v, want %v", tc.name, got, tc.backlg)
		}
	}
}

// At light load a job starves light once it has waited the queue's drain
// time scaled (StarveAfter over StarveLightDrain), within StarveLightFloor
// and StarveAfter, not StarveAfter itself: there a gang fair share passes
// over would wait two days where the queue drains in hours.
func TestStarveLightFloor(t *testing.T) {
	h := time.Hour
	now := t0.Add(100 * h)
	usage := Usage{Users: map[string]float64{"heavy": 1e8, "mid": 1e6}, Projects: map[string]float64{}}
	m1 := mk("m1").user("mid").gpus(8).est(2 * h).at(86 * h) // waited 14h
	l1 := mk("l1").user("light").est(h).at(99 * h)
	// (The tail is off: m1's estimate is longer than the queue's backlog,
	// which would put it first.) big (16 GPUs for 100h, the heaviest
	// user's) makes the queue take 101h4m to drain: 48h/168h of it is 28.9h.
	big := mk("big").user("heavy").gpus(16).est(100 * h).at(99 * h)
	for _, tc := range []struct {
		name  string
		floor time.Duration
		queue []Job
		want  []string
		// floorWant: StarveFloor's answer
		floorWant time.Duration
		drain     time.Duration // StarveLightDrain
	}{
		{"the default, 12h", 0, jobs(m1, l1), []string{"m1", "l1"}, 12 * h, 0},
		{"off", -1, jobs(m1, l1), []string{"l1", "m1"}, 48 * h, 0},
		{"a floor over the wait", 16 * h, jobs(m1, l1), []string{"l1", "m1"}, 16 * h, 0},
		{"a floor under the wait", 6 * h, jobs(m1, l1), []string{"m1", "l1"}, 6 * h, 0},
		{"the drain time scaled over the wait", 12 * h, jobs(m1, l1, big), []string{"l1", "m1", "big"},
			time.Duration(float64(48*h) / float64(168*h) * float64(363825*time.Second)), 0},
		{"scaled by a week whatever the gate", 12 * h, jobs(m1, l1, big), []string{"l1", "m1", "big"},
			time.Duration(float64(48*h) / float64(168*h) * float64(363825*time.Second)), 336 * h},
		{"the gate shut", 12 * h, jobs(m1, l1, big), []string{"l1", "m1", "big"}, 48 * h, 100 * h},
	} {
		s := Snapshot{Now: now, Nodes: []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80)}, Queue: tc.queue, Usage: usage,
			Policy: Policy{Name: PolicyFairShare, StarveAfter: 48 * h, StarveShare: 1, StarveLightFloor: tc.floor, StarveLightDrain: tc.drain, TailFactor: -1}}
		if got := ids(OrderWithUsage(s)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: order %v, want %v", tc.name, got, tc.want)
		}
		if got, ok := StarveFloor(&s); !ok || got != tc.floorWant {
			t.Errorf("%s: starve floor %v (%v), want %v", tc.name, got, ok, tc.floorWant)
		}
	}
}
