package arrays

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// idStore lists ids of stored arrays, or fails with err.
type idStore struct {
	ids []string
	err error
}

func (s idStore) ArrayIDsWithPrefix(_ context.Context, prefix string, limit int) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	var out []string
	for _, id := range s.ids {
		if strings.HasPrefix(id, prefix) && len(out) < limit {
			out = append(out, id)
		}
	}
	return out, nil
}

func TestIsArray(t *testing.T) {
	f := &fakeJobs{}
	b := New(f, Config{})
	submit(b, f, "jlive", "0-1")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stored := idStore{ids: []string{"jdone", "jdone2"}}
	for _, c := range []struct {
		name string
		st   IDStore
		id   string
		want bool
	}{
		{"in memory, no store", nil, "jlive", true},
		{"in memory", stored, "jlive", true},
		{"done, in the store", stored, "jdone", true},
		{"a prefix of a stored id", stored, "jdo", false},
		{"nowhere", stored, "jnone", false},
		{"done, no store", nil, "jdone", false},
		{"the store fails", idStore{err: errors.New("down")}, "jdone", false},
	} {
		if got := b.IsArray(c.st, c.id, log); got != c.want {
			t.Errorf("%s: IsArray(%q) = %v, want %v", c.name, c.id, got, c.want)
		}
	}
}

func TestFirstTask(t *testing.T) {
	f := &fakeJobs{}
	b := New(f, Config{})
	_, tasks := submit(b, f, "jlive", "3-5")
	st := doneStore{
		"jdone":  {Array: api.Array{ID: "jdone", Tasks: []int{7, 8}}},
		"jempty": {Array: api.Array{ID: "jempty"}},
	}
	ended := map[string]*api.Job{"jdone_7": {ID: "jdone_7"}, "jdone_8": {ID: "jdone_8"}}
	lookup := func(id string) (*api.Job, bool) { j, ok := ended[id]; return j, ok }
	for _, c := range []struct {
		name string
		st   Store
		id   string
		want *api.Job
	}{
		{"live: from memory", st, "jlive", tasks[0]},
		{"live, no store", nil, "jlive", tasks[0]},
		{"done: by its record", st, "jdone", ended["jdone_7"]},
		{"done, no store", nil, "jdone", nil},
		{"a record without tasks", st, "jempty", nil},
		{"nowhere", st, "jnone", nil},
	} {
		got, ok := b.FirstTask(c.st, c.id, lookup)
		if got != c.want || ok != (c.want != nil) {
			t.Errorf("%s: FirstTask(%q) = %v %v, want %v", c.name, c.id, got, ok, c.want)
		}
	}
}
