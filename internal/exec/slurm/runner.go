package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
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
// server's --slurm-bin), else from $PATH. The commands get the server's
// environment without Corral's credentials (sbatch passes its environment
// on to the job).
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
	cmd.Env = cleanEnv(os.Environ())
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

// cleanEnv drops the variables that hold Corral's credentials.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CORRAL_JOIN_TOKEN", "CORRAL_ADMIN_TOKEN", "CORRAL_TOKEN":
			continue
		}
		out = append(out, kv)
	}
	return out
}
