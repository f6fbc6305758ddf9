package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestBatchScriptSbatchHeaders: `corral submit SCRIPT ARG`
// with "#SBATCH --gres=gpu:2 -J sweep -t 0:05" runs the script as sent
// (editing it afterwards changes nothing) by its own #! line, on 2 GPUs,
// named sweep, stopped at its 5-second limit (Slurm's MM:SS), after its
// --signal; -o and -e files get its stdout and stderr under Slurm's
// patterns; the unshared #SBATCH option is named in a warning; corral show
// says where the limit came from.
func TestBatchScriptSbatchHeaders(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	dir := t.TempDir()
	script := filepath.Join(dir, "sweep.sh")
	body := `#!/bin/bash
#SBATCH --gres=gpu:2 -J sweep -t 0:05
#SBATCH -o out-%j-%x.log
#SBATCH -e err-%x-%u.log
#SBATCH --partition=gpu --signal=B:USR1@2
trap 'echo got-usr1' USR1
set -o pipefail
echo "gpus=$CUDA_VISIBLE_DEVICES args=$1 shell=${BASH_VERSION:+bash}"
echo to-stderr >&2
while :; do sleep 0.1; done
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, env, "submit", "--json", "-D", dir, script, "arg1")
	if code != 0 {
		t.Fatalf("corral submit SCRIPT: exit %d, stderr %s", code, stderr)
	}
	if !strings.Contains(stderr, "--partition=gpu") || strings.Contains(stderr, "--signal") {
		t.Errorf("stderr %q: want one warning naming --partition=gpu only", stderr)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(stdout), &j); err != nil || j.ID == "" {
		t.Fatalf("corral submit --json printed %q (%v)", stdout, err)
	}
	// The script was copied at submission: this edit must not run.
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho edited; exit 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j = s.waitTerminal(j.ID, 60*time.Second)
	if j.State != api.StateFailed || j.Reason != api.ReasonTimeLimit {
		t.Fatalf("job ended %s %q (%s); want failed time_limit. Log:\n%s", j.State, j.Reason, j.Message, s.logs(j.ID))
	}
	if j.Name != "sweep" || j.GPUCount != 2 || j.GrantedGPUs != 2 || j.TimeLimit == nil || j.TimeLimit.Duration() != 5*time.Second ||
		j.TimeLimitFrom != "#SBATCH" || j.ScriptName != "sweep.sh" || j.Command != "arg1" {
		t.Errorf("job: name %q, %d GPUs (granted %d), limit %v from %q, script %q, command %q",
			j.Name, j.GPUCount, j.GrantedGPUs, j.TimeLimit, j.TimeLimitFrom, j.ScriptName, j.Command)
	}
	if ran := j.FinishedAt.Sub(*j.StartedAt); ran < 5*time.Second || ran > 20*time.Second {
		t.Errorf("ran %s; want stopped soon after its 5s limit", ran)
	}
	log := s.logs(j.ID)
	out, err := os.ReadFile(filepath.Join(dir, "out-"+j.ID+"-sweep.log"))
	if err != nil {
		t.Fatalf("the -o file: %v (dir: %v)", err, ls(dir))
	}
	for _, want := range []string{"args=arg1 shell=bash", "got-usr1"} {
		if !strings.Contains(string(out), want) || !strings.Contains(log, want) {
			t.Errorf("%q: want it in the -o file %q and the log %q", want, out, log)
		}
	}
	if g := strings.SplitN(strings.TrimPrefix(strings.Fields(string(out))[0], "gpus="), ",", 3); len(g) != 2 {
		t.Errorf("-o file %q: want two GPUs in CUDA_VISIBLE_DEVICES", out)
	}
	if strings.Contains(string(out), "to-stderr") || strings.Contains(string(out), "edited") {
		t.Errorf("-o file %q: stderr belongs in -e; the edit must not run", out)
	}
	errf, err := os.ReadFile(filepath.Join(dir, "err-sweep-"+j.User+".log"))
	if err != nil || string(errf) != "to-stderr\n" {
		t.Errorf("the -e file: %q %v (dir: %v)", errf, err, ls(dir))
	}
	show, _, _ := runCLI(t, env, "show", j.ID)
	if !strings.Contains(show, "5s (#SBATCH)") || !strings.Contains(show, "sweep.sh") {
		t.Errorf("corral show:\n%s\nwant the limit with its source and the script", show)
	}
}

// ls names the files in dir, for failure messages.
func ls(dir string) []string {
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
