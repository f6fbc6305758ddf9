package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// exitCanceled is the exit code for a canceled job and for a detached
// `corral run`, as a shell gives for Ctrl-C (128 + SIGINT).
const exitCanceled = 130

// jobExitCode is the exit code `corral wait`, `submit --wait`, `run` and
// `logs -f` give for a job that ended: 0 when it completed, 130 when it was
// canceled, its own exit code when it failed with one in 1-255, else 1
// (failed without an exit code: lost node, out of memory before start, ...).
// A job that has not ended gives 1.
func jobExitCode(j api.Job) int {
	switch j.State {
	case api.StateCompleted:
		return exitOK
	case api.StateCanceled:
		return exitCanceled
	case api.StateFailed:
		if j.ExitCode != nil && *j.ExitCode > 0 && *j.ExitCode < 256 {
			return *j.ExitCode
		}
	}
	return exitError
}

// jobsExitCode is 0 when every job completed, else the exit code of the
// first (in the given order) that did not.
func jobsExitCode(jobs []api.Job) int {
	for _, j := range jobs {
		if code := jobExitCode(j); code != exitOK {
			return code
		}
	}
	return exitOK
}

// exitCodeError ends the command with code, printing msg (when not empty)
// as "corral: msg".
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.msg
}

// jobEnd says how a job ended, in a few words: "completed",
// "failed (exit 7, reason nonzero_exit)", "canceled".
func jobEnd(j api.Job) string {
	var detail []string
	if j.State == api.StateFailed && j.ExitCode != nil {
		detail = append(detail, fmt.Sprintf("exit %d", *j.ExitCode))
	}
	if j.State != api.StateCompleted && j.Reason != "" {
		detail = append(detail, "reason "+j.Reason)
	}
	if len(detail) == 0 {
		return string(j.State)
	}
	return fmt.Sprintf("%s (%s)", j.State, strings.Join(detail, ", "))
}

// endedWith returns the error that makes the command exit as job did: nil
// when it completed, else an exitCodeError saying how it ended.
func endedWith(j api.Job) error {
	code := jobExitCode(j)
	if code == exitOK {
		return nil
	}
	return exitCodeError{code: code, msg: fmt.Sprintf("job %s %s", j.ID, jobEnd(j))}
}

// waitOptions are the reconnect settings of --retry, telling stderr when
// the server is lost.
func (c *cli) waitOptions(retry time.Duration) client.WaitOptions {
	return client.WaitOptions{Retry: retry, OnRetry: func(err error) {
		fmt.Fprintf(c.stderr, "corral: lost the server (%v); reconnecting for up to %s\n", err, retry)
	}}
}

// addRetryFlag adds --retry to cmd; when says where it applies, e.g.
// " with -f", or is empty.
func addRetryFlag(cmd *cobra.Command, retry *time.Duration, when string) {
	durationVar(cmd.Flags(), retry, "retry", client.DefaultRetry,
		"how long to keep reconnecting"+when+" when the server goes away (a restart) before giving up; 0: give up at once")
}

func (c *cli) newWaitCmd() *cobra.Command {
	var retry time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID...",
		Short: "Wait until jobs end; exit with their exit code",
		Long: `Wait until every job given has ended (completed, failed or canceled), then
exit 0 if all completed, else with the exit code of the first job, in the
order given, that did not: its own exit code when it failed with one, 1
when it failed without one (a lost node, say), 130 when it was canceled.
A job array's id stands for every task of the array, in index order.

It asks the server for each job's state, every 250ms at first and every 5s
at most. A wrong id, or a server that cannot be reached at the start, fails
at once; a server restart while waiting is ridden out: it reconnects for up
to --retry.`,
		Example: `  corral wait 01JABC... 01JABD... && echo all done
  corral wait $(corral submit -o json -- ./train.sh | jq -r .id)`,
		Args: argsAtLeast(1, "the job IDs to wait for"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if retry < 0 {
				return usagef("--retry must not be negative")
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			// A wrong id, or a server that cannot be reached at all, fails
			// now, not after the jobs before it have ended; --retry is for
			// a server lost while waiting. An id prefix is resolved now,
			// so a job submitted later that shares it cannot make it
			// ambiguous while waiting.
			ids := make([]string, 0, len(args))
			for _, id := range args {
				j, err := cl.Job(cmd.Context(), id)
				if isArrayError(err) { // an array's id stands for its tasks (arrays.go)
					tasks, err := arrayTaskIDs(cmd.Context(), cl, id)
					if err != nil {
						return err
					}
					ids = append(ids, tasks...)
					continue
				}
				if err != nil {
					return err
				}
				ids = append(ids, fullID(j, id))
			}
			jobs := make([]api.Job, 0, len(args))
			for _, id := range ids {
				j, err := cl.WaitJob(cmd.Context(), id, c.waitOptions(retry))
				if err != nil {
					return err
				}
				jobs = append(jobs, j)
			}
			if err := c.emit(jobs, func(w io.Writer) error {
				for _, j := range jobs {
					if _, err := fmt.Fprintf(w, "job %s %s\n", j.ID, jobEnd(j)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
			if code := jobsExitCode(jobs); code != exitOK {
				return exitCodeError{code: code}
			}
			return nil
		},
	}
	addRetryFlag(cmd, &retry, "")
	return cmd
}

// logsFollow is corral logs -f: it checks that the job is there (a wrong
// id or server fails at once; --retry is for a server lost while
// following), then follows it, by its full id, as followJob does.
func (c *cli) logsFollow(ctx context.Context, cl *client.Client, id string, o client.LogsOptions, retry time.Duration) error {
	j, err := cl.Job(ctx, id)
	if err != nil {
		return err
	}
	return c.followJob(ctx, cl, fullID(j, id), o, retry)
}

// fullID is the id of j, the server's answer for asked (an id or a unique
// prefix of one), or asked when the answer lacks it.
func fullID(j api.Job, asked string) string {
	if j.ID != "" {
		return j.ID
	}
	return asked
}

// followJob streams job id's output to stdout until it ends (see
// client.FollowLogs) and returns the error that makes the command exit as
// the job did.
func (c *cli) followJob(ctx context.Context, cl *client.Client, id string, o client.LogsOptions, retry time.Duration) error {
	j, err := cl.FollowLogs(ctx, id, o, c.waitOptions(retry), c.stdout)
	if err != nil {
		return err
	}
	if !j.State.Terminal() {
		return nil // a pinned --attempt ended; the job goes on
	}
	return endedWith(j)
}

func (c *cli) newRunCmd() *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "run [submit flags] -- CMD [ARG...]",
		Short: "Submit a job, stream its output, exit with its exit code (like srun)",
		Long: `Submit a job as corral submit does (same flags), print its output as it
comes, and exit with the job's exit code: 0 when it completed, its own
exit code when it failed with one, 1 when it failed without one, 130 when
it was canceled.

Ctrl-C cancels the job (its output goes on until it has stopped); a second
Ctrl-C detaches, leaving the job to the server: reattach with
corral logs -f ID. A server restart is ridden out: the output resumes where
it broke off, for up to --retry.`,
		Example: `  corral run --gpus 1 -- python eval.py
  corral run -- 'nvidia-smi -L; exit 3'; echo $?`,
		Args: needCommand("corral run --gpus 1 -- python eval.py"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.array != "" {
				return usagef("corral run runs one job; submit a job array with corral submit --array (--wait waits for all its tasks)")
			}
			cl, job, err := c.submit(cmd, &f, args)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "corral: job %s %s; Ctrl-C cancels it\n", job.ID, job.State)
			wctx, stop := context.WithCancel(cmd.Context())
			done := make(chan struct{})
			go func() { // waiting.go: position and why, while queued
				defer close(done)
				c.reportWaiting(wctx, cl, job, allocPoll)
			}()
			err = c.runFollow(cmd.Context(), cl, job.ID, f.retry)
			stop()
			<-done
			return err
		},
	}
	f.register(cmd)
	addRetryFlag(cmd, &f.retry, "")
	return cmd
}

// runFollow follows job id for corral run: the first SIGINT cancels the
// job, the second detaches (exit 130).
func (c *cli) runFollow(ctx context.Context, cl *client.Client, id string, retry time.Duration) error {
	ctx, detach := context.WithCancel(ctx)
	defer detach()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	var detached atomic.Bool
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		fmt.Fprintf(c.stderr, "\ncorral: canceling job %s (Ctrl-C again to detach)\n", id)
		cctx, stop := context.WithTimeout(ctx, client.DefaultTimeout)
		if _, err := cl.Cancel(cctx, id, 0); err != nil {
			fmt.Fprintf(c.stderr, "corral: canceling job %s: %s\n", id, describe(err))
		}
		stop()
		select {
		case <-sigs:
			detached.Store(true)
			detach()
		case <-ctx.Done():
		}
	}()
	err := c.followJob(ctx, cl, id, client.LogsOptions{}, retry)
	if detached.Load() {
		return exitCodeError{code: exitCanceled,
			msg: fmt.Sprintf("detached from job %s; reattach with: corral logs -f %s", id, id)}
	}
	return err
}

// submitWait is the --wait of corral submit: wait for job id to end, say
// how it ended on stderr (stdout keeps the submit answer alone), and exit
// as it did.
func (c *cli) submitWait(ctx context.Context, cl *client.Client, id string, retry time.Duration) error {
	j, err := cl.WaitJob(ctx, id, c.waitOptions(retry))
	if err != nil {
		return err
	}
	if err := endedWith(j); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "corral: job %s completed\n", id)
	return nil
}
