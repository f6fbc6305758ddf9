package main

import (
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestShowEnv: corral show lists a job's environment by name, sorted,
// with its size (a job submitted with --export ALL carries ~60
// variables); --env and -v print the values; hidden values stay hidden.
func TestShowEnv(t *testing.T) {
	job := sampleJob()
	job.Env = map[string]string{"PATH": "/home/alice/venv/bin:/usr/bin", "HF_TOKEN": "hf_secret", "A": "x y"}
	hidden := sampleJob()
	hidden.Env = map[string]string{"HF_TOKEN": "(hidden)"}
	for _, c := range []struct {
		name    string
		job     api.Job
		args    []string
		want    []string
		wantNot []string
	}{
		{"names by default", job, nil, []string{"Env:", "3 variables (values: --env): A HF_TOKEN PATH"}, []string{"hf_secret", "/home/alice/venv/bin"}},
		{"--env prints values", job, []string{"--env"}, []string{"A='x y' HF_TOKEN=hf_secret PATH=/home/alice/venv/bin:/usr/bin"}, []string{"3 variables"}},
		{"-v prints values", job, []string{"-v"}, []string{"HF_TOKEN=hf_secret"}, nil},
		{"one variable", hidden, nil, []string{"1 variable (values: --env): HF_TOKEN"}, nil},
		{"hidden stays hidden", hidden, []string{"--env"}, []string{"HF_TOKEN='(hidden)'"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.on("GET", "/jobs/"+c.job.ID, 200, c.job)
			res := f.run(append([]string{"show", c.job.ID}, c.args...)...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("show lacks %q:\n%s", w, res.stdout)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(res.stdout, w) {
					t.Errorf("show has %q:\n%s", w, res.stdout)
				}
			}
		})
	}
}
