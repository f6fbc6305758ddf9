package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// The environment, shell and scratch of jobs (docs/jobs.md), and the
// recipes that page shows, run as written there.

// submittedID reads the job id from corral submit's answer.
var submittedID = regexp.MustCompile(`submitted job (\S+)`)

// submitEnvJob runs corral submit --wait with env added to the caller's
// environment and returns the job (ended) and its output.
func submitEnvJob(t *testing.T, s *server, env []string, args ...string) (api.Job, string) {
	t.Helper()
	stdout, stderr, _ := runCLI(t, append([]string{"CORRAL_SERVER=" + s.URL}, env...), append([]string{"submit", "--wait"}, args...)...)
	m := submittedID.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("corral submit %v: no job id in %q (stderr %q)", args, stdout, stderr)
	}
	j := s.waitTerminal(m[1], 30*time.Second)
	return j, s.logs(j.ID)
}

// publicDir is a new directory every account may enter (t.TempDir's are
// root's own, 0700), removed after the test.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-e2e-env-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// makeVenv makes a virtualenv in dir (without pip: Debian's python3-venv
// is not needed), or skips the test when this machine cannot.
func makeVenv(t *testing.T, dir string) string {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 on this machine: the venv recipes need one")
	}
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(python, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv does not work here (%v: %s): the venv recipes need it", err, out)
	}
	return venv
}

// activated is the environment `source VENV/bin/activate` leaves in the
// submitting shell (the variables it exports).
func activated(venv string) []string {
	return []string{"VIRTUAL_ENV=" + venv, "PATH=" + filepath.Join(venv, "bin") + ":" + os.Getenv("PATH")}
}

// A secret in `corral up`'s own environment never reaches a job, whoever
// submits it and however; a variable the admin names with
// --job-env-from-agent does. Each attempt has its scratch directory, gone
// once it ended.
func TestEnvAgentSecretNeverReachesJobs(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "scratch")
	s := startControl(t, t.TempDir(), freePort(t), []string{"AWS_SECRET_ACCESS_KEY=agent-secret-e2e-51c3", "TZ=Antarctica/Troll", "OLDPWD=/root/agent"},
		"up", "--simulate-gpus", "2", "--node-name", "env-node", "--job-env-from-agent", "TZ", "--scratch-dir", scratch)
	aj := s.submit(map[string]any{"gpu_count": 0, "command": `env; echo "scratch=$TMPDIR $CORRAL_SCRATCH"; touch "$TMPDIR/f"`})
	aj = s.waitTerminal(aj.ID, 30*time.Second)
	apiOut := s.logs(aj.ID)
	cli, cliOut := submitEnvJob(t, s, nil, "--gpus", "0", "--", "env")
	for name, c := range map[string]struct {
		j   string
		st  string
		out string
	}{"API": {aj.ID, string(aj.State), apiOut}, "CLI": {cli.ID, string(cli.State), cliOut}} {
		if c.st != "completed" {
			t.Fatalf("%s job %s %s: %s", name, c.j, c.st, c.out)
		}
		got := map[string]string{}
		for _, line := range strings.Split(c.out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				got[k] = v
			}
		}
		if strings.Contains(c.out, "agent-secret-e2e-51c3") || got["OLDPWD"] == "/root/agent" {
			t.Errorf("%s job sees the agent's environment:\n%s", name, c.out)
		}
		if got["TZ"] != "Antarctica/Troll" || got["PATH"] == "" || got["CORRAL_JOB_ID"] != c.j {
			t.Errorf("%s job: TZ=%q PATH=%q CORRAL_JOB_ID=%q; want the agent's TZ (--job-env-from-agent), a PATH, its id", name, got["TZ"], got["PATH"], got["CORRAL_JOB_ID"])
		}
	}
	m := regexp.MustCompile(`scratch=(\S+) (\S+)`).FindStringSubmatch(apiOut)
	if m == nil || m[1] != m[2] || !strings.HasPrefix(m[1], scratch+"/") {
		t.Fatalf("TMPDIR and CORRAL_SCRATCH %v; want one directory under %s", m, scratch)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the ended job's scratch %s is left: %v", m[1], err)
	}
}

// docs/jobs.md's recipes, as written there, on a `corral up` whose jobs
// run as its own account.
func TestEnvRecipes(t *testing.T) {
	dir := publicDir(t)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "env-recipes")
	prefix := func(out string) string { return strings.TrimSpace(out) }

	t.Run("venv from the submitting shell", func(t *testing.T) {
		venv := makeVenv(t, dir)
		j, out := submitEnvJob(t, s, activated(venv), "--gpus", "0", "--workdir", dir, "--", "python -c 'import sys; print(sys.prefix)'")
		if j.State != api.StateCompleted || prefix(out) != venv {
			t.Errorf("job %s %s printed %q; want the venv's prefix %s", j.ID, j.State, out, venv)
		}
	})
	t.Run("venv activated in the job", func(t *testing.T) {
		venv := makeVenv(t, dir)
		j, out := submitEnvJob(t, s, nil, "--export", "NONE", "--gpus", "0", "--",
			"source "+venv+"/bin/activate && python -c 'import sys; print(sys.prefix)'")
		if j.State != api.StateCompleted || prefix(out) != venv {
			t.Errorf("job %s %s printed %q; want the venv's prefix %s", j.ID, j.State, out, venv)
		}
	})
	t.Run("conda", func(t *testing.T) {
		conda := filepath.Join(dir, "miniconda3", "etc", "profile.d")
		os.MkdirAll(filepath.Join(dir, "miniconda3", "envs", "torch", "bin"), 0o755)
		os.MkdirAll(conda, 0o755)
		// conda.sh defines conda as a shell function, as the real one does.
		os.WriteFile(filepath.Join(conda, "conda.sh"), []byte(`conda() {
	case "$1" in
	activate) export CONDA_DEFAULT_ENV="$2" CONDA_PREFIX="`+dir+`/miniconda3/envs/$2"; export PATH="$CONDA_PREFIX/bin:$PATH" ;;
	*) echo "conda: $1: not in this fake" >&2; return 1 ;;
	esac
}
`), 0o644)
		j, out := submitEnvJob(t, s, nil, "--gpus", "0", "--",
			"source "+conda+"/conda.sh && conda activate torch && echo $CONDA_DEFAULT_ENV ${PATH%%:*}")
		want := "torch " + dir + "/miniconda3/envs/torch/bin"
		if j.State != api.StateCompleted || prefix(out) != want {
			t.Errorf("job %s %s printed %q; want %q", j.ID, j.State, out, want)
		}
	})
	t.Run("modules", func(t *testing.T) {
		modules := filepath.Join(dir, "modules.sh")
		os.WriteFile(modules, []byte(`module() {
	[ "$1" = load ] || return 1
	case "$2" in
	cuda/*) export CUDA_HOME=/opt/cuda/${2#cuda/} LOADEDMODULES="${LOADEDMODULES:+$LOADEDMODULES:}$2" ;;
	*) echo "module: $2 not found" >&2; return 1 ;;
	esac
}
`), 0o644)
		j, out := submitEnvJob(t, s, nil, "--gpus", "0", "--", "source "+modules+" && module load cuda/12.4 && echo $CUDA_HOME $LOADEDMODULES")
		if j.State != api.StateCompleted || prefix(out) != "/opt/cuda/12.4 cuda/12.4" {
			t.Errorf("job %s %s printed %q; want the module's variables", j.ID, j.State, out)
		}
		j, _ = submitEnvJob(t, s, nil, "--gpus", "0", "--", "source "+modules+" && module load nope/1 && echo loaded")
		if j.State != api.StateFailed {
			t.Errorf("a job whose module is missing ended %s; want failed (&& stops it)", j.State)
		}
	})
	t.Run("pipefail", func(t *testing.T) {
		j, _ := submitEnvJob(t, s, nil, "--gpus", "0", "--", "set -o pipefail; false | cat")
		if j.State != api.StateFailed || j.ExitCode == nil || *j.ExitCode != 1 {
			t.Errorf("job %s %s exit %v; want failed with 1 (bash's pipefail)", j.ID, j.State, j.ExitCode)
		}
	})
	t.Run("precedence", func(t *testing.T) {
		file := filepath.Join(dir, "job.env")
		os.WriteFile(file, []byte("# settings\nWANDB_MODE=offline\nHF_HOME=/from-file\nSEED=1\n"), 0o644)
		j, out := submitEnvJob(t, s, []string{"HF_HOME=/from-shell", "HF_TOKEN=hf-x", "LR=3e-4"},
			"--export", "PATH,HF_HOME,HF_TOKEN", "--env-file", file, "--env", "SEED=3", "--gpus", "0", "--",
			`echo "$HF_HOME $HF_TOKEN $WANDB_MODE $SEED ${LR:-unset}"`)
		if j.State != api.StateCompleted || prefix(out) != "/from-file hf-x offline 3 unset" {
			t.Errorf("job %s %s printed %q; want the file's HF_HOME, the shell's HF_TOKEN, --env's SEED, no LR", j.ID, j.State, out)
		}
	})
}

// On a root agent, a job runs as its owner's account with that account's
// identity (not the submitter's HOME or USER), the submitter's venv, and
// a scratch directory of its own, 0700, removed at its end.
func TestEnvRunAsAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root agent runs jobs as other accounts")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody on this machine")
	}
	dir := publicDir(t)
	venv := makeVenv(t, dir)
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "env-runas", "--run-as", "user")
	j, out := submitEnvJob(t, s, append(activated(venv), "HOME=/root", "USER=root", "LOGNAME=root"), "--user", "nobody", "--gpus", "0", "--workdir", dir, "--",
		`python -c 'import sys; print(sys.prefix)'; echo "$HOME $USER $LOGNAME $(id -u)"; stat -c '%U %a' "$TMPDIR"; echo "tmp=$TMPDIR"`)
	if j.State != api.StateCompleted {
		t.Fatalf("job %s %s %q: %s", j.ID, j.State, j.Message, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{venv, nobody.HomeDir + " nobody nobody " + nobody.Uid, "nobody 700"}
	if len(lines) != 4 || lines[0] != want[0] || lines[1] != want[1] || lines[2] != want[2] {
		t.Fatalf("job printed %q; want %q and the scratch", lines, want)
	}
	if tmp := strings.TrimPrefix(lines[3], "tmp="); !fileExists(filepath.Dir(tmp)) || fileExists(tmp) {
		t.Errorf("scratch %s: want it removed at the job's end, its agent's directory kept", tmp)
	}
}
