package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// envOf reads a job's environment as `env` printed it.
func envOf(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	return got
}

// A job never sees the agent's environment: a secret an admin set on the
// agent (AWS_SECRET_ACCESS_KEY), root's PATH entries, its shell's OLDPWD,
// whether the job runs under a shim of its own (a standalone agent) or
// the shim host (corral up). It sees its own env and Corral's.
func TestJobNeverSeesTheAgentsEnvironment(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "agent-secret-4f9a")
	t.Setenv("OLDPWD", "/root/agent-oldpwd")
	t.Setenv("PYENV_ROOT", "/root/.pyenv")
	for _, tc := range []struct {
		name     string
		unfenced bool
	}{{"one shim a job", false}, {"the shim host", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ts := newTasks(t, dir, 0)
			ts.unfenced = tc.unfenced
			os.MkdirAll(ts.stateDir, 0o755)
			defer ts.host.close()
			ts.start(api.TaskSpec{JobID: "j1", Env: map[string]string{"MY_VAR": "mine"}, Command: "env"})
			st := waitTask(t, ts, "the job to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
			b, _ := os.ReadFile(ts.logPath(taskKey{"j1", 0, 0}))
			if st.ExitCode != 0 {
				t.Fatalf("job ended %+v, output %q", st, b)
			}
			got := envOf(string(b))
			for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "OLDPWD", "PYENV_ROOT"} {
				if v, ok := got[k]; ok {
					t.Errorf("the job sees the agent's %s=%s", k, v)
				}
			}
			if strings.Contains(string(b), "agent-secret-4f9a") {
				t.Errorf("the agent's secret is in the job's output")
			}
			if got["MY_VAR"] != "mine" || got["CORRAL_JOB_ID"] != "j1" || got["PATH"] == "" {
				t.Errorf("env %v; want the job's MY_VAR, Corral's CORRAL_JOB_ID and a PATH", got)
			}
		})
	}
}

// The layers of a job's environment (jobenv.go), each over the one before:
// the agent's variables an admin names, the account's login-like base,
// the job's env, another account's identity, Corral's own.
func TestJobEnvLayers(t *testing.T) {
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "Europe/Paris")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "agent-secret")
	t.Setenv("HOME", "/var/lib/agent")
	self := identity{name: "corral", home: "/var/lib/agent", shell: "/usr/sbin/nologin"}
	ana := &credential{uid: 1001, gid: 1001, name: "ana", home: "/home/ana", shell: "/bin/zsh"}
	rootPath := defaultPath
	if os.Geteuid() == 0 {
		rootPath = defaultRootPath
	}
	for _, tc := range []struct {
		name      string
		fromAgent []string
		cred      *credential
		env       map[string]string
		want      map[string]string // "": absent
	}{
		{"nothing of the agent's by default", nil, nil, nil,
			map[string]string{"LANG": "", "TZ": "", "AWS_SECRET_ACCESS_KEY": "", "HOME": "/var/lib/agent", "USER": "corral", "LOGNAME": "corral",
				"SHELL": "/usr/sbin/nologin", "PATH": rootPath}},
		{"what the admin names", []string{"LANG=C.UTF-8", "TZ=Europe/Paris"}, nil, nil,
			map[string]string{"LANG": "C.UTF-8", "TZ": "Europe/Paris", "AWS_SECRET_ACCESS_KEY": ""}},
		{"the job's env wins over the agent's", []string{"LANG=C.UTF-8"}, nil, map[string]string{"LANG": "de_DE.UTF-8"},
			map[string]string{"LANG": "de_DE.UTF-8"}},
		{"an admin-named PATH is not replaced by the default", []string{"PATH=/opt/site/bin:/usr/bin"}, nil, nil,
			map[string]string{"PATH": "/opt/site/bin:/usr/bin"}},
		{"the job's PATH wins", nil, ana, map[string]string{"PATH": "/home/ana/venv/bin:/usr/bin"},
			map[string]string{"PATH": "/home/ana/venv/bin:/usr/bin"}},
		{"another account: its login base", nil, ana, nil,
			map[string]string{"HOME": "/home/ana", "USER": "ana", "LOGNAME": "ana", "SHELL": "/bin/zsh", "PATH": defaultPath}},
		{"another account: its identity wins over the job's env", nil, ana,
			map[string]string{"HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash", "VIRTUAL_ENV": "/home/ana/venv"},
			map[string]string{"HOME": "/home/ana", "USER": "ana", "LOGNAME": "ana", "SHELL": "/bin/zsh", "VIRTUAL_ENV": "/home/ana/venv"}},
		{"the agent's own account: the job's env wins", nil, nil, map[string]string{"HOME": "/home/me"},
			map[string]string{"HOME": "/home/me", "USER": "corral"}},
		{"Corral's variables win", nil, nil, map[string]string{"TMPDIR": "/tmp/login-node", "MASTER_PORT": "1"},
			map[string]string{"TMPDIR": "/scratch/n1-x/j1.0.0", "CORRAL_SCRATCH": "/scratch/n1-x/j1.0.0", "MASTER_PORT": "29500", "CORRAL_JOB_ID": "j1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := &tasks{nodeID: "n1", stateDir: t.TempDir(), jobEnv: jobEnv{fromAgent: tc.fromAgent, self: self, scratch: "/scratch/n1-x"}}
			got := envOf(strings.Join(ts.env(api.TaskSpec{JobID: "j1", MasterPort: 29500, Env: tc.env}, tc.cred), "\n"))
			for k, want := range tc.want {
				if v, ok := got[k]; v != want || ok != (want != "") {
					t.Errorf("%s=%q (set %v); want %q", k, v, ok, want)
				}
			}
		})
	}
}

func TestParseJobEnvFromAgent(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  string
		fails string
	}{
		{"LANG,TZ", "LANG TZ", ""},
		{" LANG , TZ ,", "LANG TZ", ""},
		{"", "", ""},
		{"CORRAL_TOKEN", "", "Corral's"},
		{"CUDA_VISIBLE_DEVICES", "", "Corral's"},
		{"A-B", "", "not a variable name"},
	} {
		got, err := ParseJobEnvFromAgent(tc.in)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("%q: err %v; want one saying %q", tc.in, err, tc.fails)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%q: %v %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// A command runs under bash where the node has it: source, pipefail,
// arrays and [[ ]] work, as people write them.
func TestJobCommandRunsUnderBash(t *testing.T) {
	if jobShell() == "/bin/sh" {
		t.Skip("no bash on this machine: commands run under sh")
	}
	dir := t.TempDir()
	rc := filepath.Join(dir, "activate")
	if err := os.WriteFile(rc, []byte("export ACTIVATED=yes\nmyfunc() { echo from-func; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command, out string
		exit               int
	}{
		{"source", "source " + rc + " && echo $ACTIVATED && myfunc", "yes\nfrom-func\n", 0},
		{"pipefail", "set -o pipefail; false | cat", "", 1},
		{"arrays and [[ ]]", `a=(x y z); [[ ${#a[@]} == 3 ]] && echo "${a[1]}"`, "y\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTasks(t, t.TempDir(), 0)
			os.MkdirAll(ts.stateDir, 0o755)
			ts.start(api.TaskSpec{JobID: "j1", Command: tc.command})
			st := waitTask(t, ts, "the job to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
			b, _ := os.ReadFile(ts.logPath(taskKey{"j1", 0, 0}))
			if st.ExitCode != tc.exit || string(b) != tc.out {
				t.Errorf("exit %d, output %q; want %d, %q", st.ExitCode, b, tc.exit, tc.out)
			}
		})
	}
}

// Each attempt gets a private scratch directory, its TMPDIR and
// CORRAL_SCRATCH (0700, the job's own), removed when it ends: also when
// the agent that adopted it sees it end, and at start for one no record
// knows.
func TestScratchPerAttempt(t *testing.T) {
	dir := t.TempDir()
	scratch, err := prepareScratch(filepath.Join(dir, "scratch"), "n1", filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	first := newTasks(t, dir, 0)
	first.scratch = scratch
	os.MkdirAll(first.stateDir, 0o755)
	release := filepath.Join(dir, "release")
	first.start(api.TaskSpec{JobID: "j1", Attempt: 1,
		Command: `echo "$TMPDIR $CORRAL_SCRATCH $(stat -c %a "$TMPDIR")"; touch "$TMPDIR/a"; mkdir "$TMPDIR/d"; touch "$TMPDIR/d/b"; while [ ! -e ` + release + ` ]; do sleep 0.02; done`})
	waitTask(t, first, "the job to run", func(s api.TaskStatus) bool { return s.PID > 0 })
	want := filepath.Join(scratch, "j1.1.0")
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("scratch %s: %v %v; want a 0700 directory", want, fi, err)
	}
	stray := filepath.Join(scratch, "gone.0.0")
	os.Mkdir(stray, 0o700)

	// A new agent adopts the running job, sweeps what no record knows,
	// and removes the job's scratch once it has ended.
	second := newTasks(t, dir, 0)
	second.scratch = scratch
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n := second.adopt(ctx); n != 1 {
		t.Fatalf("adopted %d tasks; want 1", n)
	}
	second.sweepScratch()
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("a scratch directory no task knows is left: %v", err)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("the running job's scratch is gone: %v", err)
	}
	os.WriteFile(release, nil, 0o644)
	st := waitTask(t, second, "the adopted job to end", func(s api.TaskStatus) bool { return s.State == api.TaskExited })
	b, _ := os.ReadFile(second.logPath(taskKey{"j1", 1, 0}))
	if st.ExitCode != 0 || string(b) != want+" "+want+" 700\n" {
		t.Errorf("job %+v wrote %q; want %q", st, b, want+" "+want+" 700\n")
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("the ended job's scratch is left: %v", err)
	}
}

// A job run as another account owns its scratch directory; the agent's
// directories above it are 0711, and one that is a link or another
// account's is refused.
func TestScratchOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root agent runs jobs as other accounts")
	}
	dir := t.TempDir()
	scratch, err := prepareScratch(filepath.Join(dir, "scratch"), "n/1", filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(scratch), scratch} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o711 {
			t.Errorf("%s is %v; want 0711", d, fi.Mode().Perm())
		}
	}
	ts := &tasks{jobEnv: jobEnv{scratch: scratch}}
	k := taskKey{"j1", 0, 0}
	if err := ts.makeScratch(k, &credential{uid: 65534, gid: 65534}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ts.scratchOf(k))
	if st, _ := fi.Sys().(*syscall.Stat_t); err != nil || st.Uid != 65534 || st.Gid != 65534 || fi.Mode().Perm() != 0o700 {
		t.Errorf("scratch %v %v; want 0700 owned by 65534:65534", fi, err)
	}

	theirs := filepath.Join(dir, "theirs")
	os.Mkdir(theirs, 0o777)
	os.Chown(theirs, 65534, 65534)
	link := filepath.Join(dir, "link")
	os.Symlink(filepath.Join(dir, "scratch"), link)
	for _, d := range []string{theirs, link} {
		if _, err := prepareScratch(d, "n1", "s"); err == nil || !strings.Contains(err.Error(), "--scratch-dir") {
			t.Errorf("--scratch-dir %s: err %v; want a refusal naming --scratch-dir", d, err)
		}
	}
}
