package jobbook

import (
	"fmt"
	"slices"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func ids(jobs []*api.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func collect(seq func(func(*api.Job) bool)) []string {
	out := []string{}
	for j := range seq {
		out = append(out, j.ID)
	}
	return out
}

// step is one change of the queue: the job id (of user) queued or taken
// out.
type step struct {
	id, user string
	queued   bool
}

// The snapshot's queue order is the queued jobs in id order, whatever
// order they were queued, requeued and taken out in; per-user counts
// follow every change.
func TestQueueOrder(t *testing.T) {
	for _, c := range []struct {
		name   string
		steps  []step
		want   []string
		byUser map[string]int
	}{
		{"in submission order", []step{{"j1", "ana", true}, {"j2", "bo", true}, {"j3", "ana", true}},
			[]string{"j1", "j2", "j3"}, map[string]int{"ana": 2, "bo": 1}},
		{"a requeued older job goes back to its place", []step{{"j1", "ana", true}, {"j3", "ana", true}, {"j2", "bo", true},
			{"j3", "ana", false}, {"j3", "ana", true}, {"j1", "ana", false}, {"j4", "bo", true}},
			[]string{"j2", "j3", "j4"}, map[string]int{"ana": 1, "bo": 2}},
		{"the clock stepped back: a new id sorts before the last", []step{{"j5", "ana", true}, {"j6", "ana", true}, {"j2", "ana", true}},
			[]string{"j2", "j5", "j6"}, map[string]int{"ana": 3}},
		{"queued twice counts once", []step{{"j1", "ana", true}, {"j1", "ana", true}},
			[]string{"j1"}, map[string]int{"ana": 1}},
		{"taken out when not queued changes nothing", []step{{"j1", "ana", false}, {"j2", "bo", true}},
			[]string{"j2"}, map[string]int{"bo": 1}},
		{"all out", []step{{"j1", "ana", true}, {"j1", "ana", false}},
			[]string{}, map[string]int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := New(nil)
			jobs := map[string]*api.Job{}
			for _, s := range c.steps {
				if jobs[s.id] == nil {
					jobs[s.id] = &api.Job{ID: s.id, User: s.user}
					b.Add(jobs[s.id])
				}
				b.SetQueued(jobs[s.id], s.queued)
			}
			if got := ids(b.QueueOrder()); !slices.Equal(got, c.want) {
				t.Errorf("queue order %v, want %v", got, c.want)
			}
			if got := ids(b.QueueOrder()); !slices.Equal(got, c.want) {
				t.Errorf("queue order asked again %v, want %v", got, c.want)
			}
			total := 0
			for _, u := range []string{"ana", "bo", "cy"} {
				if got := b.QueuedBy(u); got != c.byUser[u] {
					t.Errorf("queued by %s: %d, want %d", u, got, c.byUser[u])
				}
				total += c.byUser[u]
			}
			if b.Queued() != total {
				t.Errorf("queued %d, want %d", b.Queued(), total)
			}
			for _, id := range c.want {
				if !b.IsQueued(id) {
					t.Errorf("%s not queued", id)
				}
			}
			got := collect(b.QueuedJobs())
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("queued jobs %v, want %v", got, c.want)
			}
		})
	}
}

// Jobs that left the queue are dropped from its order also when no cycle
// asks for it; jobs apart (an array's grouped tasks) are counted but not
// listed.
func TestQueueBoundAndApart(t *testing.T) {
	b := New(func(j *api.Job) bool { return j.ArrayJobID != "" })
	for i := range 10000 {
		j := &api.Job{ID: fmt.Sprintf("k%05d", i), User: "ana"}
		b.Add(j)
		b.SetQueued(j, true)
		b.SetQueued(j, false)
	}
	if len(b.q.jobs) > 2*b.Queued()+1024 {
		t.Errorf("%d jobs listed for %d queued ones", len(b.q.jobs), b.Queued())
	}
	task := &api.Job{ID: "t1", User: "bo", ArrayJobID: "a1"}
	plain := &api.Job{ID: "t2", User: "bo"}
	for _, j := range []*api.Job{task, plain} {
		b.Add(j)
		b.SetQueued(j, true)
	}
	if got := ids(b.QueueOrder()); !slices.Equal(got, []string{"t2"}) {
		t.Errorf("queue order %v, want only the plain job", got)
	}
	if b.Queued() != 2 || b.QueuedBy("bo") != 2 || !b.IsQueued("t1") {
		t.Errorf("queued %d, by bo %d, task queued %v; want 2, 2, true", b.Queued(), b.QueuedBy("bo"), b.IsQueued("t1"))
	}
}

// A transition puts a job where its state says: the queue, the active set
// or neither.
func TestMovedAndActive(t *testing.T) {
	b := New(nil)
	j := &api.Job{ID: "j1", User: "ana"}
	k := &api.Job{ID: "j2", User: "bo", State: api.StateRunning}
	b.Add(j)
	b.Add(k)
	b.SetActive(k.ID, true)
	for _, c := range []struct {
		to             api.State
		queued, active bool
	}{
		{api.StateQueued, true, false},
		{api.StateScheduled, false, true},
		{api.StateAllocating, false, true},
		{api.StateRunning, false, true},
		{api.StateQueued, true, false}, // requeued
		{api.StateRunning, false, true},
		{api.StateCompleted, false, false},
	} {
		j.State = c.to
		b.Moved(j)
		if b.IsQueued(j.ID) != c.queued || b.IsActive(j.ID) != c.active {
			t.Errorf("%s: queued %v active %v, want %v %v", c.to, b.IsQueued(j.ID), b.IsActive(j.ID), c.queued, c.active)
		}
		wantActive := []string{"j2"}
		if c.active {
			wantActive = []string{"j1", "j2"}
		}
		if got := b.SortedActiveIDs(); !slices.Equal(got, wantActive) {
			t.Errorf("%s: active %v, want %v", c.to, got, wantActive)
		}
		got := collect(b.Active())
		slices.Sort(got)
		if !slices.Equal(got, wantActive) || b.ActiveLen() != len(wantActive) {
			t.Errorf("%s: active jobs %v (%d), want %v", c.to, got, b.ActiveLen(), wantActive)
		}
		n := 0
		for range b.ActiveIDs() {
			n++
		}
		if n != len(wantActive) {
			t.Errorf("%s: %d active ids, want %d", c.to, n, len(wantActive))
		}
	}
	if b.QueuedBy("ana") != 0 {
		t.Errorf("an ended job still counted queued: %d", b.QueuedBy("ana"))
	}
}

// The jobs in memory: in submission order, newest first page by page,
// by prefix; in id order or, once a clock step back broke it, read whole.
func TestOrderReads(t *testing.T) {
	for _, c := range []struct {
		name     string
		add      []string
		remove   []string
		all      []string // All, in submission order
		unsorted bool
	}{
		{"in id order", []string{"j01", "j02", "j05", "j07"}, []string{"j02"}, []string{"j01", "j05", "j07"}, false},
		{"the clock stepped back", []string{"j01", "j05", "j03", "j07"}, []string{"j05"}, []string{"j01", "j03", "j07"}, true},
		{"an id again", []string{"j01", "j01x", "j01"}, nil, []string{"j01", "j01x", "j01"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := New(nil)
			for _, id := range c.add {
				b.Add(&api.Job{ID: id, User: "ana"})
			}
			for _, id := range c.remove {
				b.Remove(id)
			}
			if b.unsorted != c.unsorted {
				t.Fatalf("unsorted %v, want %v", b.unsorted, c.unsorted)
			}
			if got := collect(b.All()); !slices.Equal(got, c.all) {
				t.Errorf("all %v, want %v", got, c.all)
			}
			if b.OrderLen() != len(c.add) {
				t.Errorf("order of %d, want %d until compacted", b.OrderLen(), len(c.add))
			}
			b.Compact()
			if b.OrderLen() != len(c.all) {
				t.Errorf("order of %d compacted, want %d", b.OrderLen(), len(c.all))
			}
			if got := collect(b.All()); !slices.Equal(got, c.all) {
				t.Errorf("all compacted %v, want %v", got, c.all)
			}
		})
	}
	for _, unsorted := range []bool{false, true} {
		b := New(nil)
		if unsorted {
			b.Add(&api.Job{ID: "jz"}) // a later id first: the order is broken
			b.Remove("jz")
		}
		for _, id := range []string{"j01", "j02", "j03", "j04", "j05", "j11"} {
			b.Add(&api.Job{ID: id, User: map[bool]string{true: "ana", false: "bo"}[id < "j04"]})
		}
		if b.unsorted != unsorted {
			t.Fatalf("unsorted %v, want %v", b.unsorted, unsorted)
		}
		all := func(*api.Job) bool { return true }
		ana := func(j *api.Job) bool { return j.User == "ana" }
		for _, c := range []struct {
			cursor string
			limit  int
			match  func(*api.Job) bool
			want   []string
		}{
			{"", 3, all, []string{"j11", "j05", "j04"}},
			{"j04", 3, all, []string{"j03", "j02", "j01"}},
			{"j02", 10, all, []string{"j01"}},
			{"", 2, ana, []string{"j03", "j02"}},
			{"j02", 2, ana, []string{"j01"}},
			{"j01", 5, all, []string{}},
		} {
			if got := ids(b.Newest(c.cursor, c.limit, c.match)); !slices.Equal(got, c.want) {
				t.Errorf("unsorted %v, newest before %q (%d): %v, want %v", unsorted, c.cursor, c.limit, got, c.want)
			}
		}
		for prefix, want := range map[string][]string{"j0": {"j01", "j02", "j03", "j04", "j05"}, "j1": {"j11"}, "j11": {"j11"}, "jz": {}, "k": {}} {
			got := collect(b.WithPrefix(prefix))
			if !slices.Equal(got, want) {
				t.Errorf("unsorted %v, prefix %q: %v, want %v", unsorted, prefix, got, want)
			}
		}
		if n := len(collect(b.Unordered())); n != 6 || b.Len() != 6 {
			t.Errorf("unordered %d, len %d; want 6", n, b.Len())
		}
	}
}

// Idempotency keys: kept while their jobs are in memory; those of jobs
// that left go once they are too many.
func TestKeys(t *testing.T) {
	b := New(nil)
	b.LoadKeys(map[string]string{"old": "j00"})
	for i := range 5 {
		id := fmt.Sprintf("j%02d", i+1)
		b.Add(&api.Job{ID: id})
		b.SetKey("k"+id, id)
	}
	b.TrimKeys(0) // 6 keys, 5 jobs: not too many
	if _, ok := b.Key("old"); !ok {
		t.Fatal("a key forgotten before they were too many")
	}
	for _, id := range []string{"j01", "j02", "j03", "j04"} {
		b.Remove(id)
	}
	b.TrimKeys(0) // 6 keys, 1 job
	for key, want := range map[string]bool{"old": false, "kj01": false, "kj04": false, "kj05": true} {
		if id, ok := b.Key(key); ok != want {
			t.Errorf("key %s kept %v (%s), want %v", key, ok, id, want)
		}
	}
	if b.Get("j05") == nil || b.Get("j01") != nil {
		t.Error("Get after Remove")
	}
}
