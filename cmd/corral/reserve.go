package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// corral reserve: bookings (docs/bookings.md), with Slurm's flag names.

// bookingOpts are the flags of reserve create and reserve update.
type bookingOpts struct {
	gpus     int
	nodes    []string
	gpuType  string
	start    string
	end      string
	duration time.Duration
	users    []string
	project  string
	flags    []string
}

func (b *bookingOpts) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&b.gpus, "gpus", 0, "GPUs to book")
	fl.StringSliceVar(&b.nodes, "nodes", nil, "book GPUs of these nodes only (n1,n2)")
	fl.StringVar(&b.gpuType, "gpu-type", "", "book GPUs of this model (e.g. H100); not with --nodes")
	fl.StringVar(&b.start, "start", "", `when it begins: "2026-12-01 09:00" (local time), RFC 3339, or now`)
	fl.StringVar(&b.end, "end", "", "when it ends (as --start); or --duration")
	durationVar(fl, &b.duration, "duration", 0, "how long it lasts, e.g. 8h; or --end")
	fl.StringSliceVar(&b.users, "users", nil, "who may run jobs in it (ana,bo; default: you; users may book only for themselves)")
	fl.StringVar(&b.project, "project", "", "the project it is for")
	fl.StringSliceVar(&b.flags, "flags", nil, "flex, magnetic, ignore_jobs, daily, weekly, maint (admins)")
}

// request makes the API request from the flags the command line set.
func (b *bookingOpts) request(cmd *cobra.Command, now time.Time) (api.ReservationRequest, error) {
	var req api.ReservationRequest
	set := cmd.Flags().Changed
	if set("gpus") {
		req.GPUs = &b.gpus
	}
	if set("nodes") {
		req.Nodes = &b.nodes
	}
	if set("gpu-type") {
		req.GPUType = &b.gpuType
	}
	if set("start") {
		t, err := parseWhen(b.start, now)
		if err != nil {
			return req, usagef("--start: %v", err)
		}
		req.Start = &t
	}
	if set("end") {
		if set("duration") {
			return req, usagef("give --end or --duration, not both")
		}
		t, err := parseWhen(b.end, now)
		if err != nil {
			return req, usagef("--end: %v", err)
		}
		req.End = &t
	}
	if set("duration") {
		req.Duration = api.RawValue(strconv.Quote(b.duration.String()))
	}
	if set("users") {
		req.Users = &b.users
	}
	if set("project") {
		req.Project = &b.project
	}
	if set("flags") {
		req.Flags = &b.flags
	}
	return req, nil
}

// parseWhen reads a time given on the command line: "now", RFC 3339, or
// "2006-01-02 15:04" (or with T, or with seconds) in local time. It
// returns it as RFC 3339.
func parseWhen(s string, now time.Time) (string, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "now") {
		return now.UTC().Format(time.RFC3339), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC().Format(time.RFC3339), nil
	}
	for _, layout := range []string{"2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t.UTC().Format(time.RFC3339), nil
		}
	}
	return "", fmt.Errorf(`%q is not a time: give "2026-12-01 09:00" (local time), RFC 3339 or now`, s)
}

func (c *cli) newReserveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reserve",
		Short: "Book GPUs ahead of time: create, list, show, update, delete (/reservations)",
		Long: `Bookings set GPUs aside for some users over an interval (Slurm's reservations).
The server chooses the GPUs when the booking is made: of --nodes or of
--gpu-type, free of other bookings and (unless ignore_jobs) of running jobs
expected to run into its start. Users book for themselves within the weekly
allowance (the server's --booking-allowance, GPU-hours per ISO week); admins
book anything for anyone. A booking no job has used is released the server's
--purge-after after its start, and its idle GPU-hours are charged to its
booker. See docs/bookings.md.`,
	}
	cmd.AddCommand(c.newReserveCreateCmd(), c.newReserveListCmd(), c.newReserveShowCmd(), c.newReserveUpdateCmd(), c.newReserveDeleteCmd())
	return cmd
}

func (c *cli) newReserveCreateCmd() *cobra.Command {
	var b bookingOpts
	cmd := &cobra.Command{
		Use:   "create NAME --gpus N [--nodes n1,n2 | --gpu-type H100] --start TIME (--duration 8h | --end TIME) [--users ana,bo] [--project P] [--flags F,...]",
		Short: "Book GPUs (POST /reservations)",
		Example: `  corral reserve create vision-demo --gpus 8 --nodes node-1 --start "2026-12-01 09:00" --duration 8h --users ana,bo --project vision
  corral reserve create standup --gpus 2 --gpu-type H100 --start "2026-12-01 09:00" --end "2026-12-01 10:00" --flags daily`,
		Args: argsExactly(1, "the booking's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("gpus") || b.gpus < 1 {
				return usagef("--gpus N is required (1 or more)")
			}
			if !cmd.Flags().Changed("start") {
				return usagef("--start is required")
			}
			if !cmd.Flags().Changed("end") && !cmd.Flags().Changed("duration") {
				return usagef("give --duration or --end")
			}
			req, err := b.request(cmd, time.Now())
			if err != nil {
				return err
			}
			req.Name = args[0]
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Reservation, error) {
				return cl.CreateReservation(ctx, req)
			}, printBooking)
		},
	}
	b.register(cmd)
	return cmd
}

func (c *cli) newReserveUpdateCmd() *cobra.Command {
	var b bookingOpts
	cmd := &cobra.Command{
		Use:     "update NAME [--gpus N] [--start TIME] [--duration D | --end TIME] [--users ...] [--flags ...]",
		Short:   "Change a booking: only the flags given change (PATCH /reservations/{name})",
		Example: `  corral reserve update vision-demo --duration 10h`,
		Args:    argsExactly(1, "the booking's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := b.request(cmd, time.Now())
			if err != nil {
				return err
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Reservation, error) {
				return cl.UpdateReservation(ctx, args[0], req)
			}, printBooking)
		},
	}
	b.register(cmd)
	return cmd
}

func (c *cli) newReserveListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Every booking, by start (GET /reservations)",
		Args:  argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) ([]api.Reservation, error) {
				return cl.Reservations(ctx)
			}, func(w io.Writer, rs []api.Reservation) error {
				t := newTable(w, "NAME", "STATE", "START", "END", "GPUS", "WHERE", "USERS", "PROJECT", "FLAGS", "OWNER")
				for _, r := range rs {
					t.row(r.Name, r.State, localTime(r.Start), localTime(r.End), strconv.Itoa(r.GPUs), gpusText(r.Allocation),
						strings.Join(r.Users, ","), r.Project, strings.Join(r.Flags, ","), r.Owner)
				}
				return t.flush()
			})
		},
	}
}

func (c *cli) newReserveShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "One booking, with its GPUs (GET /reservations/{name})",
		Args:  argsExactly(1, "the booking's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Reservation, error) {
				return cl.Reservation(ctx, args[0])
			}, printBooking)
		},
	}
}

func (c *cli) newReserveDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a booking; one already begun is released (DELETE /reservations/{name})",
		Args:  argsExactly(1, "the booking's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Reservation, error) {
				return cl.DeleteReservation(ctx, args[0])
			}, func(w io.Writer, r api.Reservation) error {
				if r.State == api.BookingReleased {
					_, err := fmt.Fprintf(w, "booking %s released\n", r.Name)
					return err
				}
				_, err := fmt.Fprintf(w, "booking %s deleted\n", r.Name)
				return err
			})
		},
	}
}

// printBooking writes one booking, field by field.
func printBooking(w io.Writer, r api.Reservation) error {
	t := newTable(w)
	t.row("name:", r.Name)
	t.row("state:", r.State)
	t.row("start:", localTime(r.Start))
	t.row("end:", localTime(r.End))
	t.row("gpus:", strconv.Itoa(r.GPUs))
	t.row("where:", gpusText(r.Allocation))
	if len(r.Nodes) > 0 {
		t.row("nodes asked:", strings.Join(r.Nodes, ","))
	}
	if r.GPUType != "" {
		t.row("gpu type:", r.GPUType)
	}
	t.row("users:", strings.Join(r.Users, ","))
	t.row("project:", r.Project)
	t.row("flags:", strings.Join(r.Flags, ","))
	t.row("owner:", r.Owner)
	if r.UsedAt != nil {
		t.row("used since:", localTime(*r.UsedAt))
	}
	if r.ReleasedAt != nil {
		t.row("released:", localTime(*r.ReleasedAt))
	}
	if r.IdleGPUSeconds > 0 {
		t.row("idle GPU-hours:", strconv.FormatFloat(r.IdleGPUSeconds/3600, 'f', 2, 64))
	}
	return t.flush()
}

// localTime writes t in local time, to the minute.
func localTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04 MST") }

// gpusText says which GPUs: "node-1:0-7 node-2:0,1".
func gpusText(as []api.Allocation) string {
	var parts []string
	for i := 0; i < len(as); {
		k := i
		var idx []int
		for ; k < len(as) && as[k].NodeID == as[i].NodeID; k++ {
			idx = append(idx, as[k].GPUID)
		}
		parts = append(parts, as[i].NodeID+":"+runs(idx))
		i = k
	}
	return strings.Join(parts, " ")
}

// runs writes ascending indexes as runs: 0-3,6.
func runs(n []int) string {
	var b strings.Builder
	for i := 0; i < len(n); {
		k := i
		for k+1 < len(n) && n[k+1] == n[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(n[i]))
		if k > i {
			b.WriteString("-" + strconv.Itoa(n[k]))
		}
		i = k + 1
	}
	return b.String()
}
