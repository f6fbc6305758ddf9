package jobio

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A submission's script, output files, --begin, --signal and the sources
// of its limits are checked and copied; each bad one is a 422 naming its
// field.
func TestValidateJobIO(t *testing.T) {
	now := time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)
	raw := func(s string) api.RawValue { return api.RawValue(`"` + s + `"`) }
	cases := map[string]struct {
		req       api.SubmitRequest
		wantField string
		check     func(t *testing.T, j api.Job)
	}{
		"script without command": {req: api.SubmitRequest{Script: "#!/bin/sh\necho hi\n", ScriptName: "train.sh"},
			check: func(t *testing.T, j api.Job) {
				if j.Script == "" || j.ScriptName != "train.sh" {
					t.Fatalf("job %+v", j.JobIO)
				}
			}},
		"patterns":             {req: api.SubmitRequest{Command: "x", Workdir: "/w", Output: "o-%j.log", Error: "/e/%x.err"}},
		"bad pattern":          {req: api.SubmitRequest{Command: "x", Workdir: "/w", Output: "o-%q.log"}, wantField: "output"},
		"relative, no wd":      {req: api.SubmitRequest{Command: "x", Error: "e.log"}, wantField: "error"},
		"script too big":       {req: api.SubmitRequest{Script: "#!/bin/sh\n" + strings.Repeat("x", 1<<20)}, wantField: "script"},
		"script name alone":    {req: api.SubmitRequest{Command: "x", ScriptName: "a.sh"}, wantField: "script_name"},
		"script name a path":   {req: api.SubmitRequest{Script: "x", ScriptName: "../a.sh"}, wantField: "script_name"},
		"empty script":         {req: api.SubmitRequest{Script: " \n"}, wantField: "script"},
		"bad begin":            {req: api.SubmitRequest{Command: "x", Begin: "someday"}, wantField: "begin"},
		"bad signal":           {req: api.SubmitRequest{Command: "x", Signal: "R:USR1"}, wantField: "signal"},
		"bad source":           {req: api.SubmitRequest{Command: "x", TimeLimit: raw("5m"), TimeLimitFrom: "guess"}, wantField: "time_limit_from"},
		"source without value": {req: api.SubmitRequest{Command: "x", EstimateFrom: "flag"}, wantField: "estimate_from"},
		"begin, signal, sources": {req: api.SubmitRequest{Command: "x", Begin: "now+2hours", Signal: "b:usr1@5m",
			TimeLimit: raw("1:00:00"), TimeLimitFrom: "#SBATCH", EstimatedDuration: raw("2d")},
			check: func(t *testing.T, j api.Job) {
				if j.Begin == nil || !j.Begin.Equal(now.Add(2*time.Hour)) || j.Signal != "B:USR1@300" ||
					j.TimeLimitFrom != "#SBATCH" || j.EstimateFrom != "api" || j.TimeLimit.Duration() != time.Hour ||
					j.EstimatedDuration.Duration() != 48*time.Hour {
					t.Fatalf("job %+v, limit %v, estimate %v", j.JobIO, j.TimeLimit, j.EstimatedDuration)
				}
			}},
		"begin in the past is none": {req: api.SubmitRequest{Command: "x", Begin: "2020-01-01"},
			check: func(t *testing.T, j api.Job) {
				if j.Begin != nil {
					t.Fatalf("begin %v", j.Begin)
				}
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := api.Job{Workdir: tc.req.Workdir} // as the orchestrator's validation leaves it
			for _, d := range []struct {
				raw api.RawValue
				dst **api.Seconds
			}{{tc.req.TimeLimit, &j.TimeLimit}, {tc.req.EstimatedDuration, &j.EstimatedDuration}} {
				if !api.IsNull(d.raw) {
					s, err := api.ParseSecondsJSON(d.raw)
					if err != nil {
						t.Fatal(err)
					}
					*d.dst = &s
				}
			}
			err := Validate(&tc.req, &j, now)
			var ae *api.Error
			switch {
			case tc.wantField != "":
				if !errors.As(err, &ae) || ae.Field != tc.wantField || ae.Status != 422 {
					t.Fatalf("err = %v, want 422 naming %s", err, tc.wantField)
				}
				return
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if tc.check != nil {
				tc.check(t, j)
			}
		})
	}
}
