package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/spf13/cobra"
)

// holdPoll is how often corral hold --wait asks about a queued hold.
const holdPoll = time.Second

func (c *cli) newHoldCmd() *cobra.Command {
	var (
		gpus     int
		duration time.Duration
		wait     bool
		name     string
		gpuType  string
		gpuMem   float64
		part     partFlags // --mig, --gpu-share, --gpu-compute (gpushare.go)
	)
	cmd := &cobra.Command{
		Use:   "hold [--gpus N | --mig PROFILE | --gpu-share 20G] [--duration 2h] [--wait] [--name X]",
		Short: "Hold GPUs for work outside Corral, for a while (POST /cluster/gpu-allocate)",
		Long: `Hold GPUs for work run outside Corral: they go to no job until the hold is
released (corral release) or its duration is over (default and most: the
server's --max-interactive-time, 8h). A hold counts in its user's usage and
fair share, and in --max-interactive-gpus (which refuses a hold with --wait
past it).

Without --wait the hold is granted at once or refused (exit 1) when the GPUs
are not free. With --wait a hold that cannot be granted now is queued as an
interactive job (its id is the hold's from then on) and corral hold waits
until it is granted, then prints its GPUs; Ctrl-C stops waiting but leaves
the hold queued (corral release ID takes it back).

--mig and --gpu-share hold a part of one GPU instead, a MIG slice or an MPS
share, as a job asks for one (docs/cluster.md "Placing slices and shares");
the hold then counts its fraction of the GPU.`,
		Example: `  corral hold --gpus 2 --duration 2h --name notebook
  corral hold --gpus 1 --wait
  corral hold --mig 1g.10gb --duration 1h
  corral hold --gpu-share 20G --gpu-compute 25`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if gpus < 1 {
				return usagef("--gpus must be 1 or more")
			}
			if duration < 0 {
				return usagef("--duration must not be negative")
			}
			if name == "" {
				name = "hold-" + time.Now().UTC().Format("20060102-150405")
			}
			req := api.AllocateRequest{JobID: name, GPUCount: gpus, GPUType: gpuType, MemoryGB: gpuMem, Wait: wait}
			if err := part.apply(&req.GPUPart); err != nil {
				return err
			}
			if duration > 0 {
				req.Duration = api.RawValue(fmt.Sprintf("%q", duration.String()))
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			h, err := cl.Allocate(cmd.Context(), req)
			if err != nil {
				return err
			}
			if h.Queued {
				if !c.json() {
					fmt.Fprintf(c.stderr, "GPUs busy: hold %s queued as job %s; waiting (corral show %s)\n", h.Name, h.JobID, h.JobID)
				}
				j, err := waitHold(cmd.Context(), cl, h.JobID)
				if err != nil {
					return err
				}
				h.Allocation, h.Queued = j.Allocation, false
				if j.StartedAt != nil {
					h.HeldAt = *j.StartedAt
				}
				if j.StartedAt != nil && j.TimeLimit != nil {
					at := j.StartedAt.Add(j.TimeLimit.Duration() - time.Minute) // the backstop's minute (docs/interactive.md)
					h.ExpiresAt = &at
				}
			}
			return c.emit(h, func(w io.Writer) error { return printHold(w, h) })
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&gpus, "gpus", 1, "GPUs to hold (on one node)")
	durationVar(fl, &duration, "duration", 0, "how long the hold lasts once granted, e.g. 2h (default: the server's --max-interactive-time)")
	fl.BoolVar(&wait, "wait", false, "when the GPUs are not free, queue the hold and wait for it instead of failing")
	fl.StringVar(&name, "name", "", "the hold's name (default: hold-DATE-TIME)")
	fl.StringVar(&gpuType, "gpu-type", "", "GPU model, e.g. H100")
	fl.Float64Var(&gpuMem, "gpu-mem", 0, "minimum memory per GPU, in GB")
	part.register(fl)
	return cmd
}

// waitHold waits until a queued hold's job holds its GPUs; it fails when
// the job ends first.
func waitHold(ctx context.Context, cl *client.Client, id string) (api.Job, error) {
	t := time.NewTicker(holdPoll)
	defer t.Stop()
	for {
		j, err := cl.Job(ctx, id)
		if err != nil && !client.Transient(err) {
			return j, err
		}
		if err == nil && j.State == api.StateRunning {
			return j, nil
		}
		if err == nil && j.State.Terminal() {
			return j, fmt.Errorf("hold %s ended %s before it was granted: %s", id, j.State, j.Message)
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-t.C:
		}
	}
}

func printHold(w io.Writer, h api.Hold) error {
	name := h.JobID
	if h.Name != "" {
		name = h.Name + " (job " + h.JobID + ")"
	}
	fmt.Fprintf(w, "hold %s: %s\n", name, holdWhat(h.Allocation))
	for _, a := range h.Allocation {
		switch {
		case a.MIG != nil:
			fmt.Fprintf(w, "  %s GPU %d MIG slice %s %s\n", a.NodeID, a.GPUID, a.MIG.Profile, a.MIG.UUID)
		case a.ShareMiB > 0:
			fmt.Fprintf(w, "  %s GPU %d %s: %s\n", a.NodeID, a.GPUID, a.GPUUUID,
				fmtPart(api.GPUPart{GPUShareMiB: a.ShareMiB, GPUCompute: a.ShareCompute}))
		default:
			fmt.Fprintf(w, "  %s GPU %d %s\n", a.NodeID, a.GPUID, a.GPUUUID)
		}
	}
	if h.ExpiresAt != nil {
		fmt.Fprintf(w, "expires %s\n", h.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if h.ReleasedAt != nil {
		fmt.Fprintf(w, "released %s\n", h.ReleasedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

func (c *cli) newReleaseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "release ID",
		Short: "Release a hold: its GPUs go back to the queue (POST /cluster/gpu-release)",
		Long: `Release a hold by its name, or, for a hold that was queued (corral hold
--wait), by its job id: a queued or granted hold's job is canceled. Only the
hold's owner or an admin may release it.`,
		Example: `  corral release notebook`,
		Args:    argsExactly(1, "the hold's name or job ID, e.g. corral release notebook"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Hold, error) {
				return cl.Release(ctx, api.ReleaseRequest{JobID: args[0]})
			}, printHold)
		},
	}
}

// holdWhat says what a hold holds, for its header: "2 GPUs", "1 MIG slice
// (1g.10gb)", "a 20 GiB share" (with its compute percent where it
// reserves one).
func holdWhat(as []api.Allocation) string {
	if len(as) == 1 {
		switch a := as[0]; {
		case a.MIG != nil:
			return "1 MIG slice (" + a.MIG.Profile + ")"
		case a.ShareMiB > 0:
			s := "a " + strings.TrimSuffix(fmtMiB(a.ShareMiB), "G") + " GiB share"
			if a.ShareMiB < 1024 {
				s = "a " + strings.TrimSuffix(fmtMiB(a.ShareMiB), "M") + " MiB share"
			}
			if a.ShareCompute > 0 {
				s += fmt.Sprintf(" (%d%% of the compute)", a.ShareCompute)
			}
			return s
		}
	}
	return fmt.Sprintf("%d GPUs", len(as))
}
