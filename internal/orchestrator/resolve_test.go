package orchestrator

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/jobbook"
)

func resolver(ids ...string) *Orchestrator {
	o := &Orchestrator{jobs: jobbook.New(arrays.Grouped), arr: arrays.New(nil, arrays.Config{})}
	o.refs = newRefs(o)
	for _, id := range ids {
		o.jobs.Add(&api.Job{ID: id})
	}
	return o
}

// TestResolveJobID: an exact id wins even when it is also another id's
// prefix; a unique prefix of at least MinIDPrefix characters names its
// job; a shorter one, or one that matches nothing, is a 404; one that
// matches several is a 409 ambiguous_id saying how many.
func TestResolveJobID(t *testing.T) {
	o := resolver("j01abcdef", "j01abcdefxyz", "j01abcxyz", "j02zzzzzz", "j9")
	for _, tc := range []struct {
		in, want string
		status   int
		msg      string
	}{
		{in: "j01abcdef", want: "j01abcdef"},       // exact, also a prefix of j01abcdefxyz
		{in: "j01abcdefx", want: "j01abcdefxyz"},   // unique prefix
		{in: "j01abcx", want: "j01abcxyz"},         // unique prefix
		{in: "j02zzz", want: "j02zzzzzz"},          // exactly MinIDPrefix characters
		{in: "j9", want: "j9"},                     // a short full id
		{in: "j02zz", status: 404},                 // too short
		{in: "j01abc", status: 409, msg: "3 jobs"}, // ambiguous
		{in: "j01abcde", status: 409, msg: "2 jobs"},
		{in: "j03aaaaaa", status: 404},
		{in: "", status: 404},
	} {
		got, err := o.FeatureOps().Refs.JobID(tc.in)
		if tc.status == 0 {
			if err != nil || got != tc.want {
				t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		e := api.AsError(err)
		if err == nil || e.Status != tc.status || got != "" {
			t.Errorf("%q: %q, %v; want status %d", tc.in, got, err, tc.status)
			continue
		}
		if tc.status == 409 && (e.Code != "ambiguous_id" || e.Field != "job_id" || !strings.Contains(e.Message, tc.msg)) {
			t.Errorf("%q: %+v; want ambiguous_id on job_id saying %q", tc.in, e, tc.msg)
		}
		if tc.status == 404 && !errors.Is(err, api.ErrNotFound) {
			t.Errorf("%q: %v is not a not-found", tc.in, err)
		}
	}
}

// BenchmarkResolveJobIDPrefix: an exact id is a map lookup; a prefix
// scans the jobs once. With 100,000 jobs in memory a prefix lookup
// measured 0.5 ms (15 ms under -race): fine on the API path.
func BenchmarkResolveJobIDPrefix(b *testing.B) {
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("j%026dx", i)
	}
	o := resolver(ids...)
	for b.Loop() {
		got, err := o.FeatureOps().Refs.JobID("j00000000000000000000099999")
		if err != nil || got != ids[99_999] {
			b.Fatalf("%q, %v", got, err)
		}
	}
}
