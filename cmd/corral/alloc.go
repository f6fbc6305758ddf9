package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// allocHold is the command of an allocation's job: it holds the GPUs,
// doing nothing, until the allocation ends (its shell exits, Ctrl-C, or
// its time limit).
const allocHold = "exec sleep 2147483647"

// allocDefaultTime is an allocation's time limit without --time.
const allocDefaultTime = "8h"

// allocPoll is how often corral alloc looks at its queued job.
const allocPoll = time.Second

func (c *cli) newAllocCmd() *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "alloc [submit flags] [-- CMD [ARG...]]",
		Short: "Allocate GPUs interactively and open a shell on them, like salloc",
		Long: `Queue an interactive allocation (a job of class interactive: never
preempted), wait while it is queued (printing its place and why it waits),
then open a shell on its node, as corral shell does, with CUDA_VISIBLE_DEVICES
and the CORRAL_* variables set. CMD, when given, runs instead of the shell.

The allocation ends when the shell exits (corral alloc then exits with the
shell's exit code) or at its time limit, --time (default 8h; the server may
cap it): the shell is told and closed. Ctrl-C while it is queued cancels the
request. It takes corral submit's flags (--gpus, --gpu-type, --mem, ...).`,
		Example: `  corral alloc --gpus 1                 # a shell on one GPU for up to 8h
  corral alloc --gpus 2 -t 2:00:00 -- python   # Python on two GPUs for up to 2h`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.array != "" || f.wait {
				return usagef("corral alloc holds one allocation; --array does not apply")
			}
			if f.image.image != "" || len(f.image.mounts) > 0 {
				// The shell of an allocation runs on the node (as corral
				// shell does), not in a container: an image would hold
				// the GPUs with a shell outside it.
				return usagef("corral alloc does not take --image: its shell runs on the node, not in a container; run the work in the image with corral submit --image or corral run --image")
			}
			req, err := allocRequest(cmd, &f)
			if err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			return c.alloc(cmd.Context(), cl, req, f.idempotencyKey, args, cmd)
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("time").Usage = "the allocation's time limit, e.g. 2h or 2:00:00 (a bare number is minutes; default " + allocDefaultTime + "): then it ends and its shell is closed"
	return cmd
}

// allocRequest is the submission of an allocation: the holding command,
// class interactive, and -t/--time (default 8h) as its time limit and, without
// --estimate, its estimate.
func allocRequest(cmd *cobra.Command, f *submitFlags) (api.SubmitRequest, error) {
	if f.timeLimit == "" {
		f.timeLimit = allocDefaultTime
	}
	if f.duration == "" {
		f.duration = f.timeLimit
	}
	req, err := f.request(cmd, []string{allocHold})
	if err != nil {
		return req, err
	}
	req.Class = api.ClassInteractive
	if !changed(cmd.Flags(), "time") {
		req.TimeLimitFrom = "" // alloc's default: the server says api
	}
	if !cmd.Flags().Changed("estimate") {
		req.EstimateFrom = ""
	}
	if f.name == "" {
		req.Name = "alloc"
	}
	return req, nil
}

// alloc submits the allocation, waits for it, runs the shell in it, and
// ends it.
func (c *cli) alloc(ctx context.Context, cl *client.Client, req api.SubmitRequest, key string, argv []string, cmd *cobra.Command) error {
	job, err := cl.Submit(ctx, req, key)
	if err != nil {
		return err
	}
	id := job.ID
	// Whatever happens from here, the allocation ends with the command.
	defer func() {
		cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), client.DefaultTimeout)
		defer stop()
		if j, err := cl.Job(cctx, id); err == nil && j.State.Terminal() {
			return
		}
		if _, err := cl.Cancel(cctx, id, 0); err != nil {
			fmt.Fprintf(c.stderr, "corral: ending allocation %s: %s\n", id, describe(err))
			return
		}
		fmt.Fprintf(c.stderr, "corral: allocation %s ended\n", id)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	fmt.Fprintf(c.stderr, "corral: allocation %s %s\n", id, job.State)
	last := ""
	for job.State != api.StateRunning {
		if job.State.Terminal() {
			return exitCodeError{code: exitError, msg: fmt.Sprintf("allocation %s %s before it started", id, jobEnd(job))}
		}
		if job.State == api.StateQueued {
			line := queuedLine(job) // waiting.go, shared with corral run
			if line != last {
				fmt.Fprintf(c.stderr, "corral: allocation %s %s (Ctrl-C cancels)\n", id, line)
				last = line
			}
		}
		t := time.NewTimer(allocPoll)
		select {
		case <-sigs:
			t.Stop()
			fmt.Fprintf(c.stderr, "\ncorral: canceling allocation %s\n", id)
			return exitCodeError{code: exitCanceled}
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if job, err = cl.Job(ctx, id); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.stderr, "corral: allocation %s granted on %s; opening a shell (exit it to end the allocation)\n", id, allocNodes(job))
	// In the shell, Ctrl-C goes to the remote side (raw terminal); a
	// signal to this process ends the session and the allocation.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-sigs:
			stop()
		case <-sctx.Done():
		}
	}()
	code, err := c.runShell(sctx, cl, id, 0, commandArgs(argv), cmd.InOrStdin())
	if err != nil {
		return err
	}
	if code != exitOK {
		return exitCodeError{code: code}
	}
	return nil
}

// allocNodes names the nodes and GPUs of a running job, for the grant line.
func allocNodes(j api.Job) string {
	if len(j.Allocation) == 0 {
		return "a node (no GPUs)"
	}
	s, node := "", ""
	for _, a := range j.Allocation {
		if a.NodeID != node {
			if s != "" {
				s += "; "
			}
			s += "node " + a.NodeID + " GPU"
			node = a.NodeID
		} else {
			s += ","
		}
		s += fmt.Sprintf(" %d", a.GPUID)
	}
	return s
}
