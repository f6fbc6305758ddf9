package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
)

// Runner runs one Slurm command (sbatch, squeue, scontrol, scancel, sacct)
// and returns its standard output. An exit status other than 0 is an error
// that carries the command's standard error. Implementations are safe for
// concurrent use; tests use a fake with recorded outputs.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// CommandRunner runs the real commands, from Bin when it is set (the
// server's --slurm-bin), else from $PATH. The commands never get the
// server's environment: sbatch (--export=ALL) passes its environment on to
// the job, so they run with Slurm's own settings (SLURM_*, SBATCH_*) and a
// login-like base for the server's account (slurmEnv), and the job's env is
// written into its batch script (docs/jobs.md "Other executors").
type CommandRunner struct {
	Bin string
}

// Run implements Runner.
func (r CommandRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := name
	if r.Bin != "" {
		path = filepath.Join(r.Bin, name)
	}
	cmd := osexec.CommandContext(ctx, path, args...)
	cmd.Env = slurmEnv(os.Environ(), filepath.Dir(cmd.Path), currentAccount())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// account is the Unix account the server (and so its Slurm jobs) runs as.
type account struct {
	name, home, shell string
	root              bool
}

// currentAccount is the server's account, from its passwd entry.
func currentAccount() account {
	a := account{name: os.Getenv("USER"), home: os.Getenv("HOME"), shell: "/bin/sh", root: os.Geteuid() == 0}
	u, err := user.Current()
	if err != nil {
		return a
	}
	a.name, a.home = u.Username, u.HomeDir
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ":")
			if len(f) == 7 && f[2] == u.Uid && f[6] != "" {
				a.shell = f[6]
				break
			}
		}
	}
	return a
}

// slurmEnv is the environment of a Slurm command, and so the base of every
// job's (sbatch --export=ALL): Slurm's own settings from the server's
// environment (SLURM_*, SBATCH_*: SLURM_CONF and the like), then a
// login-like base for the server's account, as an agent's layer 2: HOME,
// USER, LOGNAME, SHELL, and a PATH of the system's directories (with the
// sbin ones for root) plus slurmBin, where the Slurm commands are (srun,
// which a gang's batch script runs). Nothing else of the server's
// environment (its secrets, its shell's PATH, Corral's tokens) is passed.
func slurmEnv(environ []string, slurmBin string, a account) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SBATCH_") {
			out = append(out, kv)
		}
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	if a.root {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	if slurmBin != "" && slurmBin != "." && !slices.Contains(strings.Split(path, ":"), slurmBin) {
		path += ":" + slurmBin
	}
	out = append(out, "PATH="+path)
	for k, v := range map[string]string{"HOME": a.home, "USER": a.name, "LOGNAME": a.name, "SHELL": a.shell} {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	slices.Sort(out)
	return out
}
