package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestSubmitScript: a file as the first argument is a batch script: its
// contents are sent, its arguments are the command, and its #CORRAL and
// #SBATCH headers are flags; the command line wins over #CORRAL, which
// wins over #SBATCH; unshared #SBATCH options are named in one warning.
func TestSubmitScript(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sweep := write("sweep.sh", "#!/bin/bash\n#SBATCH --gres=gpu:2 -J sweep -t 0:05\n#SBATCH --partition=gpu --qos high\n#SBATCH -o out-%j.log --mem=1G\n#CORRAL --max-retries 2 --mem 2G\necho $1\n")
	plain := write("plain.sh", "#!/bin/sh\necho hi\n")
	tests := []struct {
		name    string
		args    []string
		want    map[string]any
		warning string // in stderr; "" none
	}{
		{"headers", []string{sweep, "a b", "c"}, map[string]any{"script_name": "sweep.sh", "command": "'a b' c", "gpu_count": 2.0,
			"name": "sweep", "time_limit": "0:05", "time_limit_from": "#SBATCH", "output": "out-%j.log", "max_retries": 2.0,
			"mem_mib": 2048.0}, "--partition=gpu, --qos high"},
		{"the command line wins", []string{"-t", "10", "--gpus", "1", "-J", "mine", sweep}, map[string]any{"gpu_count": 1.0, "name": "mine",
			"time_limit": "10m0s", "time_limit_from": "flag", "command": ""}, "--partition=gpu"},
		{"a script without headers is named after its file", []string{plain}, map[string]any{"name": "plain.sh", "script_name": "plain.sh", "time_limit": nil}, ""},
		{"after -- a file is a command", []string{"--", plain}, map[string]any{"command": plain, "script": nil}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.on("POST", "/queue/submit", http.StatusCreated, api.Job{ID: "01JNEW", State: api.StateQueued, Priority: api.PriorityNormal})
			res := f.run(append([]string{"submit"}, tt.args...)...)
			if res.code != 0 {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			var body map[string]any
			if err := json.Unmarshal(f.lastTo("/queue/submit").Body, &body); err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if got, ok := body[k]; want == nil && ok || want != nil && got != want {
					t.Errorf("body[%s] = %#v, want %#v", k, got, want)
				}
			}
			if tt.want["script_name"] != nil && !strings.HasPrefix(body["script"].(string), "#!") {
				t.Errorf("script %q: want the file's contents", body["script"])
			}
			if tt.warning == "" && res.stderr != "" || !strings.Contains(res.stderr, tt.warning) {
				t.Errorf("stderr %q, want the warning %q", res.stderr, tt.warning)
			}
		})
	}
	// A file that is no script is refused, saying why.
	f := newFakeServer(t)
	res := f.run("submit", write("data.txt", "python train.py\n"))
	if res.code != exitUsage || !strings.Contains(res.stderr, "#!") {
		t.Fatalf("a file without #!: exit %d, stderr %q", res.code, res.stderr)
	}
	res = f.run("submit", write("bad.sh", "#!/bin/sh\n#CORRAL --gpus\n"))
	if res.code != exitUsage || !strings.Contains(res.stderr, "#CORRAL") {
		t.Fatalf("a bad #CORRAL line: exit %d, stderr %q", res.code, res.stderr)
	}
}

// TestSubmitJSONSwitch: --json prints the API's answer; -o names a file.
func TestSubmitJSONSwitch(t *testing.T) {
	f := newFakeServer(t)
	f.on("POST", "/queue/submit", http.StatusCreated, api.Job{ID: "01JNEW", State: api.StateQueued, Priority: api.PriorityNormal})
	res := f.run("submit", "--json", "-o", "out.log", "--", "true")
	var j api.Job
	if err := json.Unmarshal([]byte(res.stdout), &j); err != nil || j.ID != "01JNEW" {
		t.Fatalf("stdout %q: want the job as JSON (%v)", res.stdout, err)
	}
	if res := f.run("submit", "-t", "soon", "--", "true"); res.code != exitUsage || !strings.Contains(res.stderr, "D-HH:MM:SS") {
		t.Fatalf("-t soon: exit %d, stderr %q; want the forms named", res.code, res.stderr)
	}
}

// TestShowLimits: corral show gives the time limit, the estimate and where
// each came from, the script and the output files.
func TestShowLimits(t *testing.T) {
	f := newFakeServer(t)
	limit, est := api.Seconds(5), api.Seconds(7200)
	j := api.Job{ID: "01JSCRIPT", State: api.StateQueued, Priority: api.PriorityNormal, Command: "'a b'", TimeLimit: &limit, EstimatedDuration: &est}
	j.ScriptName, j.Script, j.Output, j.Signal = "sweep.sh", "#!/bin/sh\necho\n", "out-%j.log", "B:USR1@60"
	j.TimeLimitFrom, j.EstimateFrom = "#SBATCH", "flag"
	f.on("GET", "/jobs/01JSCRIPT", 200, j)
	res := f.run("show", "01JSCRIPT")
	for _, want := range []string{"Time limit:", "5s (#SBATCH)", "Estimate:", "2h0m0s (flag)", "sweep.sh (15 bytes, 2 lines", "Arguments:", "'a b'", "Output file:", "out-%j.log", "B:USR1@60"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("corral show: %q missing from\n%s", want, res.stdout)
		}
	}
	j.TimeLimitFrom, j.EstimatedDuration, j.EstimateFrom = "default", nil, ""
	f.on("GET", "/jobs/01JSCRIPT", 200, j)
	if res := f.run("show", "01JSCRIPT"); !strings.Contains(res.stdout, "5s (server default)") || !strings.Contains(res.stdout, "none given") {
		t.Errorf("corral show, default limit and no estimate:\n%s", res.stdout)
	}
}
