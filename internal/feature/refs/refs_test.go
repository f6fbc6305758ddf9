package refs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/feature/featuretest"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// TestParseNumber: a number, or NUMBER_INDEX, all digits; anything else
// is not a number.
func TestParseNumber(t *testing.T) {
	for _, tc := range []struct {
		ref  string
		n    int64
		task string
		ok   bool
	}{
		{"1234", 1234, "", true},
		{"1234_7", 1234, "7", true},
		{"1234_07", 1234, "07", true},
		{"0", 0, "", false},
		{"-3", 0, "", false},
		{"12a", 0, "", false},
		{"1234_", 0, "", false},
		{"_7", 0, "", false},
		{"1_2_3", 0, "", false},
		{"1234567890123456789", 0, "", false}, // past 18 digits
		{"", 0, "", false},
	} {
		n, task, ok := ParseNumber(tc.ref)
		if n != tc.n || task != tc.task || ok != tc.ok {
			t.Errorf("ParseNumber(%q) = %d, %q, %v; want %d, %q, %v", tc.ref, n, task, ok, tc.n, tc.task, tc.ok)
		}
	}
}

// TestTakeAndLoad: numbers follow the largest the store holds, and each
// is written in the batch of its job.
func TestTakeAndLoad(t *testing.T) {
	r := New(newFake(t), Config{})
	r.Load(&store.State{MaxNumber: 7, Jobs: []api.Job{{Number: 9}}, Arrays: []store.ArrayRecord{{Array: api.Array{Number: 8}}}})
	tx := &featuretest.Tx{}
	if n := r.Take(tx, "a"); n != 10 {
		t.Fatalf("first number %d; want 10", n)
	}
	if n := r.Take(tx, "b"); n != 11 {
		t.Fatalf("second number %d; want 11", n)
	}
	want := []store.NumberRow{{Number: 10, ID: "a"}, {Number: 11, ID: "b"}}
	if fmt.Sprint(tx.B.Numbers) != fmt.Sprint(want) {
		t.Fatalf("batch numbers %v; want %v", tx.B.Numbers, want)
	}
}

// TestJobID: an exact id wins even when it is also another id's prefix;
// a unique prefix of at least MinIDPrefix characters names its job, in
// memory or in the store; a shorter one, or one that matches nothing, is
// a 404; one that matches several is a 409 ambiguous_id saying how many;
// an array's id is a 404 is_array.
func TestJobID(t *testing.T) {
	f := newFake(t)
	f.add(api.Job{ID: "j01abcdef"}, api.Job{ID: "j01abcdefxyz"}, api.Job{ID: "j01abcxyz"}, api.Job{ID: "j9"},
		api.Job{ID: "arr0001_0", ArrayJobID: "arr0001"})
	f.recent["j05recent"] = true
	f.ended = []string{"j02zzzzzz", "j01abcqqq"}
	f.done = []string{"old0001"}
	r := New(f, Config{Store: fakeStore{f}})
	for _, tc := range []struct {
		in, want string
		status   int
		code     string
		msg      string
	}{
		{in: "j01abcdef", want: "j01abcdef"},     // exact, also a prefix of j01abcdefxyz
		{in: "j01abcdefx", want: "j01abcdefxyz"}, // unique prefix
		{in: "j02zzz", want: "j02zzzzzz"},        // exactly MinIDPrefix characters, ended
		{in: "j05recent", want: "j05recent"},     // recently ended, in memory
		{in: "j9", want: "j9"},                   // a short full id
		{in: "arr0001_0", want: "arr0001_0"},     // a task
		{in: "j02zz", status: 404},               // too short
		{in: "j01abc", status: 409, code: "ambiguous_id", msg: "4 jobs"},
		{in: "j01abcde", status: 409, code: "ambiguous_id", msg: "2 jobs"},
		{in: "arr0001", status: 404, code: "is_array"},
		{in: "arr000", status: 404, code: "is_array"},
		{in: "old0001", status: 404, code: "is_array"}, // a done array
		{in: "j03aaaaaa", status: 404},
		{in: "", status: 404},
	} {
		got, err := r.JobID(tc.in)
		if tc.status == 0 {
			if err != nil || got != tc.want {
				t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		e := api.AsError(err)
		if err == nil || e.Status != tc.status || (tc.code != "" && e.Code != tc.code) || got != "" || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%q: %q, %v; want status %d code %q saying %q", tc.in, got, err, tc.status, tc.code, tc.msg)
		}
		if tc.status == 404 && tc.code == "" && !errors.Is(err, api.ErrNotFound) {
			t.Errorf("%q: %v is not a not-found", tc.in, err)
		}
	}
}

// TestArrayID: an array by its id or a unique prefix, in memory or done;
// a prefix shared with other jobs, or by two arrays, is a 409 on
// array_id.
func TestArrayID(t *testing.T) {
	f := newFake(t)
	f.add(api.Job{ID: "arr0001_0", ArrayJobID: "arr0001"}, api.Job{ID: "arr0002"})
	f.done = []string{"old0001", "old0002", "arr0001"}
	r := New(f, Config{Store: fakeStore{f}})
	for _, tc := range []struct {
		in, want string
		live     bool
		status   int
	}{
		{in: "arr0001", want: "arr0001", live: true},
		{in: "old0001", want: "old0001"},
		{in: "arr000", status: 409}, // arr0002 is a job
		{in: "old000", status: 409}, // two arrays
		{in: "nope000", status: 404},
		{in: "arr", status: 404}, // too short
	} {
		aid, live, ok, err := r.Array(tc.in)
		if tc.status == 0 {
			if err != nil || !ok || aid != tc.want || live != tc.live {
				t.Errorf("Array(%q) = %q, %v, %v, %v; want %q, %v", tc.in, aid, live, ok, err, tc.want, tc.live)
			}
			continue
		}
		_, err = r.ArrayID(tc.in)
		if e := api.AsError(err); err == nil || e.Status != tc.status || (tc.status == 409 && e.Field != "array_id") {
			t.Errorf("ArrayID(%q) = %v; want status %d", tc.in, err, tc.status)
		}
	}
}

// TestRef: numbers, tasks as NUMBER_INDEX and PREFIX_INDEX, ids, and
// names unique among the caller's jobs.
func TestRef(t *testing.T) {
	f := newFake(t)
	f.add(api.Job{ID: "job0001", Name: "train", User: "ana", Number: 1},
		api.Job{ID: "job0002", Name: "eval", User: "ana", Number: 2},
		api.Job{ID: "job0003", Name: "eval", User: "ana", Number: 3},
		api.Job{ID: "job0004", Name: "train", User: "bob", Number: 4},
		api.Job{ID: "arr0005_0", ArrayJobID: "arr0005", Name: "sweep", User: "ana", Number: 5},
		api.Job{ID: "arr0005_1", ArrayJobID: "arr0005", Name: "sweep", User: "ana", Number: 5})
	f.numbers = map[int64]string{1: "job0001", 5: "arr0005"}
	r := New(f, Config{Store: fakeStore{f}})
	for _, tc := range []struct {
		ref, user, want string
		array           bool
		status          int
	}{
		{ref: "1", user: "ana", want: "job0001"},
		{ref: "5", user: "ana", want: "arr0005", array: true},
		{ref: "5_1", user: "ana", want: "arr0005_1"},
		{ref: "arr0005_1", user: "ana", want: "arr0005_1"},
		{ref: "arr000_0", user: "ana", want: "arr0005_0"}, // PREFIX_INDEX
		{ref: "job0002", user: "ana", want: "job0002"},
		{ref: "train", user: "ana", want: "job0001"},
		{ref: "train", user: "bob", want: "job0004"},
		{ref: "sweep", user: "ana", want: "arr0005", array: true},
		{ref: "eval", user: "ana", status: 409},
		{ref: "train", user: "", status: 404},
		{ref: "5_9", user: "ana", status: 404},
		{ref: "9", user: "ana", status: 404},
		{ref: "nothing", user: "ana", status: 404},
	} {
		got, array, err := r.Ref(tc.ref, tc.user)
		if tc.status == 0 {
			if err != nil || got != tc.want || array != tc.array {
				t.Errorf("Ref(%q, %q) = %q, %v, %v; want %q, %v", tc.ref, tc.user, got, array, err, tc.want, tc.array)
			}
			continue
		}
		if e := api.AsError(err); err == nil || e.Status != tc.status {
			t.Errorf("Ref(%q, %q) = %q, %v; want status %d", tc.ref, tc.user, got, err, tc.status)
		}
	}
	if _, err := r.JobRef("5", "ana"); api.AsError(err).Code != "is_array" {
		t.Errorf("JobRef(5) = %v; want is_array", err)
	}
	if _, err := r.ArrayRef("1", "ana"); api.AsError(err).Status != 404 {
		t.Errorf("ArrayRef(1) = %v; want 404", err)
	}
	if _, _, err := r.Ref("eval", "ana"); !strings.Contains(err.Error(), "3, 2") {
		t.Errorf("Ref(eval) = %v; want the numbers, newest first", err)
	}
}

// TestRefNamedInStore: a name is looked for in the store too, where the
// caller's ended jobs are; memory's copy of a job counts once.
func TestRefNamedInStore(t *testing.T) {
	f := newFake(t)
	f.add(api.Job{ID: "job0002", Name: "eval", User: "ana", Number: 2})
	f.names = []store.Named{{ID: "job0002", Number: 2}}
	r := New(f, Config{Store: fakeStore{f}})
	if got, _, err := r.Ref("eval", "ana"); err != nil || got != "job0002" {
		t.Fatalf("Ref(eval) = %q, %v; want job0002", got, err)
	}
	f.names = append(f.names, store.Named{ID: "job0001", Number: 1})
	if _, _, err := r.Ref("eval", "ana"); api.AsError(err).Code != "ambiguous_id" {
		t.Fatalf("Ref(eval) with one in the store = %v; want ambiguous_id", err)
	}
}

// TestActive: the caller's unfinished jobs, an array once (running when
// one of its tasks is), newest (the greatest id) first, from memory only.
func TestActive(t *testing.T) {
	f := newFake(t)
	f.add(api.Job{ID: "job0001", User: "ana", Number: 1, State: api.StateQueued},
		api.Job{ID: "job0002", User: "ana", Number: 2, State: api.StateCompleted},
		api.Job{ID: "job0003", User: "bob", Number: 3, State: api.StateRunning},
		api.Job{ID: "arr0004_0", ArrayJobID: "arr0004", User: "ana", Number: 4, State: api.StateQueued},
		api.Job{ID: "arr0004_1", ArrayJobID: "arr0004", User: "ana", Number: 4, State: api.StateRunning})
	got := New(f, Config{Store: fakeStore{f}}).Active("ana")
	want := []api.JobRef{{Number: 1, ID: "job0001", State: api.StateQueued},
		{Number: 4, ID: "arr0004", State: api.StateRunning, Array: true}} // by id, descending
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Active(ana) = %v; want %v", got, want)
	}
	if len(f.reads) != 0 {
		t.Fatalf("Active read the store: %v", f.reads)
	}
}

// TestStoreReads: each read of the store is announced to BeforeRead by
// name, with no view open; without a store, only memory answers and
// what it does not hold is a 404.
func TestStoreReads(t *testing.T) {
	f := newFake(t)
	f.add(api.Job{ID: "j01live0", Name: "train", User: "ana", Number: 1})
	f.ended = []string{"j02ended"}
	f.numbers = map[int64]string{2: "j02ended"}
	for _, tc := range []struct {
		name      string
		withStore bool
		ref       string
		wantID    string
		status    int
		announced []string
	}{
		{"a number, from the store, then its id", true, "2", "j02ended", 0, []string{"job number", "array ids", "array ids", "job"}},
		{"an ended job's id", true, "j02ended", "j02ended", 0, []string{"array ids", "array ids", "job"}},
		{"a live job's id: no array of that prefix", true, "j01live0", "j01live0", 0, []string{"array ids"}},
		{"a number, no store", false, "2", "", 404, []string{"job number"}},
		{"an ended job's id, no store", false, "j02ended", "", 404, []string{"array ids", "array ids", "job", "job ids"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var announced []string
			cfg := Config{BeforeRead: func(what string) {
				if f.open {
					t.Fatalf("BeforeRead(%s) with a view open", what)
				}
				announced = append(announced, what)
			}}
			if tc.withStore {
				cfg.Store = fakeStore{f}
			}
			id, err := New(f, cfg).JobRef(tc.ref, "ana")
			var e *api.Error
			switch {
			case tc.status == 0 && (err != nil || id != tc.wantID):
				t.Fatalf("JobRef(%q) = %q, %v; want %q", tc.ref, id, err, tc.wantID)
			case tc.status != 0 && (!errors.As(err, &e) || e.Status != tc.status):
				t.Fatalf("JobRef(%q) = %q, %v; want %d", tc.ref, id, err, tc.status)
			}
			if fmt.Sprint(announced) != fmt.Sprint(tc.announced) {
				t.Fatalf("reads announced %v; want %v", announced, tc.announced)
			}
		})
	}
}
