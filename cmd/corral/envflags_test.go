package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// The job's env: the exported variables (--export), then the
// --env-file files in order, then --env; --export ALL leaves out the
// calling shell's state, Corral's own and names the API refuses.
func TestEnvFlagsBuild(t *testing.T) {
	environ := []string{
		"PATH=/home/ana/venv/bin:/usr/bin", "VIRTUAL_ENV=/home/ana/venv", "HF_HOME=/data/hf", "HOME=/home/ana",
		"PWD=/home/ana/proj", "OLDPWD=/home/ana", "SHLVL=2", "_=/usr/bin/corral", "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1",
		"CORRAL_TOKEN=tok", "CORRAL_SERVER=http://head:7450", "CORRAL_JOB_ID=parent", "CUDA_VISIBLE_DEVICES=3",
		"BASH_FUNC_module%%=() {  echo module; }", "BIG=" + strings.Repeat("x", 33<<10),
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "job.env")
	os.WriteFile(file, []byte("# the job's settings\n\nexport HF_HOME=/scratch/hf\nWANDB_MODE=\"offline\"\nQUOTED='a b'\nVIRTUAL_ENV\nLR=3e-4 # not a comment\n"), 0o644)
	second := filepath.Join(dir, "second.env")
	os.WriteFile(second, []byte("LR=1e-3\n"), 0o644)
	for _, tc := range []struct {
		name  string
		flags envFlags
		want  map[string]string
		warn  string
		fails string
	}{
		{"ALL by default", envFlags{export: exportDefault},
			map[string]string{"PATH": "/home/ana/venv/bin:/usr/bin", "VIRTUAL_ENV": "/home/ana/venv", "HF_HOME": "/data/hf", "HOME": "/home/ana"},
			"BIG is left out", ""},
		{"NONE", envFlags{export: "NONE"}, nil, "", ""},
		{"none, in any case, with --env", envFlags{export: "none", env: []string{"A=1"}}, map[string]string{"A": "1"}, "", ""},
		{"names", envFlags{export: "PATH,HF_HOME,NOT_SET"}, map[string]string{"PATH": "/home/ana/venv/bin:/usr/bin", "HF_HOME": "/data/hf"}, "", ""},
		{"a named shell variable is sent", envFlags{export: "PWD"}, map[string]string{"PWD": "/home/ana/proj"}, "", ""},
		{"NAME=VALUE and ALL", envFlags{export: "ALL,HF_HOME=/x"},
			map[string]string{"PATH": "/home/ana/venv/bin:/usr/bin", "VIRTUAL_ENV": "/home/ana/venv", "HF_HOME": "/x", "HOME": "/home/ana"}, "BIG is left out", ""},
		{"an env file over the exported", envFlags{export: "HF_HOME", files: []string{file}},
			map[string]string{"HF_HOME": "/scratch/hf", "WANDB_MODE": "offline", "QUOTED": "a b", "VIRTUAL_ENV": "/home/ana/venv", "LR": "3e-4 # not a comment"}, "", ""},
		{"files in order, --env last", envFlags{export: "NONE", files: []string{file, second}, env: []string{"HF_HOME=/flag"}},
			map[string]string{"HF_HOME": "/flag", "WANDB_MODE": "offline", "QUOTED": "a b", "VIRTUAL_ENV": "/home/ana/venv", "LR": "1e-3"}, "", ""},
		{"ALL and NONE", envFlags{export: "ALL,NONE"}, nil, "", "exclude each other"},
		{"a bad name", envFlags{export: "PATH,A-B"}, nil, "", `"A-B" is not a variable name`},
		{"Corral's own", envFlags{export: "CORRAL_TOKEN"}, nil, "", "CORRAL_TOKEN is Corral's own"},
		{"a missing file", envFlags{export: "NONE", files: []string{filepath.Join(dir, "nope")}}, nil, "", "--env-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warn bytes.Buffer
			got, err := tc.flags.build(environ, &warn)
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("err %v; want one saying %q", err, tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("env %v; want %v", got, tc.want)
			}
			if !strings.Contains(warn.String(), tc.warn) || tc.warn == "" && warn.Len() > 0 {
				t.Errorf("warned %q; want %q", warn.String(), tc.warn)
			}
		})
	}
}

func TestEnvFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.env")
	os.WriteFile(bad, []byte("OK=1\nnot a line\n"), 0o644)
	_, err := (&envFlags{export: "NONE", files: []string{bad}}).build(nil, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), bad+":2: want KEY=VALUE") {
		t.Errorf("err %v; want one naming the file and line 2", err)
	}
}

// corral submit, run and alloc send the caller's environment (less what
// --export ALL leaves out) with --env-file and --env over it.
func TestSubmitSendsTheCallersEnvironment(t *testing.T) {
	t.Setenv("VIRTUAL_ENV", "/home/ana/venv")
	t.Setenv("HF_HOME", "/data/hf")
	t.Setenv("OLDPWD", "/root")
	file := filepath.Join(t.TempDir(), "e.env")
	os.WriteFile(file, []byte("HF_HOME=/file\nA=file\n"), 0o644)
	for _, args := range [][]string{
		{"submit", "--env-file", file, "--env", "A=flag", "--", "true"},
		{"run", "--env-file", file, "--env", "A=flag", "--", "true"},
	} {
		f := newFakeServer(t)
		f.on("POST", "/queue/submit", http.StatusCreated, api.Job{ID: "01JNEW", State: api.StateCompleted})
		f.on("GET", "/jobs/01JNEW", http.StatusOK, api.Job{ID: "01JNEW", State: api.StateCompleted, ExitCode: new(int)})
		f.run(args...)
		var body struct {
			Env map[string]string `json:"env"`
		}
		for _, r := range f.requests() {
			if r.Path == "/queue/submit" {
				json.Unmarshal(r.Body, &body)
			}
		}
		if body.Env["VIRTUAL_ENV"] != "/home/ana/venv" || body.Env["HF_HOME"] != "/file" || body.Env["A"] != "flag" || body.Env["PATH"] != os.Getenv("PATH") {
			t.Errorf("%s: env %v; want the caller's VIRTUAL_ENV and PATH, the file's HF_HOME, --env's A", args[0], body.Env)
		}
		if _, ok := body.Env["OLDPWD"]; ok {
			t.Errorf("%s: OLDPWD was sent", args[0])
		}
		for k := range body.Env {
			if strings.HasPrefix(k, "CORRAL_") {
				t.Errorf("%s: %s was sent", args[0], k)
			}
		}
	}
}
