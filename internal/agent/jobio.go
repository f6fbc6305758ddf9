package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/batchscript"
)

// Batch scripts, -o/-e files and --signal on the node (docs/jobs.md,
// "Batch scripts").
//
// A batch script is written to a private file, executable, and the job's
// command becomes `exec SCRIPT ARGS`, so the kernel runs it with its own
// #! line and it is the job's main process. For a job run as the agent's
// account the file lies beside the attempt's log (the data dir is
// private); for a job run as another account, in the task's own notice
// directory (notice.go: the agent's, 0755), owned by the job's account
// and readable by it alone, removed with that directory.
//
// -o/-e files are written by `corral shim --tee` (tee.go), which the
// command runs first, as the job's account and in its cgroup: it opens
// the files as the job would, copies the job's stdout and stderr into
// them as well as into the attempt's log, and exits as the job did.

// prepareJobIO writes tk's script and rewrites its command for its script
// and output files. Called before the task starts, after prepareNotice.
func (t *tasks) prepareJobIO(tk *task, cred *credential) error {
	spec := &tk.spec
	if spec.Script == "" && spec.Output == "" && spec.Error == "" {
		return nil
	}
	cmd := spec.Command
	if spec.Script != "" {
		path := t.attemptFile(keyOf(*spec), ".script")
		t.mu.Lock()
		if tk.notice != "" {
			path = filepath.Join(filepath.Dir(tk.notice), "script")
		}
		t.mu.Unlock()
		if err := writeScript(path, spec.Script, cred); err != nil {
			return fmt.Errorf("batch script: %w", err)
		}
		cmd = strings.TrimSpace("exec " + quoteArg(path) + " " + spec.Command)
	}
	if spec.Output != "" || spec.Error != "" {
		tee := t.teeCommand()
		args := []string{"exec"}
		for _, a := range tee {
			args = append(args, quoteArg(a))
		}
		if spec.Output != "" {
			args = append(args, "--output", quoteArg(spec.Output))
		}
		if spec.Error != "" {
			args = append(args, "--error", quoteArg(spec.Error))
		}
		if name, ok := strings.CutPrefix(spec.Signal, "B:"); ok {
			args = append(args, "--forward", name) // the script's own signal passes the tee
		}
		// "$0" is the shell the agent runs the command with (sh, or bash
		// where the node has it): the job's own command runs under it.
		cmd = strings.Join(append(args, "--", `"$0"`, "-c", quoteArg(cmd)), " ")
	}
	spec.Command = cmd
	return nil
}

// teeCommand is the command that runs `corral shim --tee`.
func (t *tasks) teeCommand() []string {
	if len(t.tee) > 0 {
		return t.tee
	}
	return append(append([]string{}, t.shim...), "--tee")
}

// writeScript writes body at path, executable by the job's account alone.
func writeScript(path, body string, cred *credential) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, []byte(body), 0o700); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o700); err != nil { // whatever the umask
		return err
	}
	if cred != nil {
		if err := os.Chown(tmp, int(cred.uid), int(cred.gid)); err != nil {
			return err
		}
	}
	return os.Rename(tmp, path)
}

// quoteArg quotes s for /bin/sh.
func quoteArg(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// armSignal sends the task's --signal at its time: SignalAfter from its
// start, to its process group ("B:": its main process only). An ended or
// stopping task gets none.
func (t *tasks) armSignal(tk *task) {
	name := tk.spec.Signal
	if name == "" {
		return
	}
	main := strings.HasPrefix(name, "B:")
	sig, err := batchscript.ParseSignal(strings.TrimPrefix(name, "B:"))
	if err != nil {
		t.log.Warn("job signal not understood", "job_id", tk.spec.JobID, "signal", name)
		return
	}
	wait := tk.spec.SignalAfter.Duration() - time.Since(tk.startedAt)
	time.AfterFunc(max(wait, 0), func() {
		t.mu.Lock()
		pid, done := tk.jobPID(), tk.exited != nil || tk.stopping
		t.mu.Unlock()
		if done || pid <= 0 {
			return
		}
		target := -pid
		if main {
			target = pid
		}
		t.log.Info("job signaled before its time limit", "job_id", tk.spec.JobID, "rank", tk.spec.Rank, "signal", name)
		syscall.Kill(target, syscall.Signal(sig.Number))
	})
}
