package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/usage"
)

// newUsageCmd is `corral usage`: the usage report, like Slurm's sreport.
func (c *cli) newUsageCmd() *cobra.Command {
	var by, since, until string
	var csv bool
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "GPU usage and cost by user, project, GPU type, node or week",
		Long: `corral usage reports the GPU time charged to the usage ledger: every ended
attempt of every job (interactive ones too), holds, and booked GPU time left
idle, attempts lost to a server crash included (up to the server's last
heartbeat). GPU-hours are allocated time; used GPU-hours integrate the GPUs'
utilization readings, and efficiency is used over allocated. Cost is at
today's prices (corral price). --since and --until take a date (local
midnight) or RFC 3339; a record that straddles a bound counts its part
inside. Users see their own usage; admins see everyone's.`,
		Example: `  corral usage
  corral usage --by project --since 2026-11-01 --until 2026-12-01
  corral usage --by gpu-type --csv > november.csv`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if csv && c.json() {
				return usagef("--csv and -o json are two output formats; give one")
			}
			if by != "" && !usage.ValidBy(by) {
				return usagef("--by %q: want one of %v", by, usage.ByValues)
			}
			s, err := usage.ParseTime(since, time.Local)
			if err != nil {
				return usagef("--since: %v", err)
			}
			u, err := usage.ParseTime(until, time.Local)
			if err != nil {
				return usagef("--until: %v", err)
			}
			if !s.IsZero() && !u.IsZero() && !u.After(s) {
				return usagef("--until must be after --since")
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			rep, err := cl.Usage(cmd.Context(), by, s, u)
			if err != nil {
				return err
			}
			if csv {
				_, err := c.stdout.Write(usage.CSV(rep))
				return err
			}
			return c.emit(rep, func(w io.Writer) error { return printUsage(w, rep) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&by, "by", usage.ByUser, "group by user, project, gpu-type, node or week")
	fl.StringVar(&since, "since", "", "from this date (2026-11-01, local midnight) or RFC 3339 time; default: the beginning")
	fl.StringVar(&until, "until", "", "up to (not including) this date or time; default: now")
	fl.BoolVar(&csv, "csv", false, "print CSV: a header row, then one row per group (gpu_seconds beside gpu_hours and cost)")
	return cmd
}

func printUsage(w io.Writer, rep usage.Report) error {
	t := newTable(w, rep.By, "GPU-HOURS", "USED", "EFFICIENCY", "COST", "RECORDS")
	row := func(r usage.Row) {
		t.row(r.Key, fmtFloat(r.GPUHours), fmtFloat(r.UsedGPUHours), fmt.Sprintf("%.0f%%", r.Efficiency*100), "$"+strconv.FormatFloat(r.Cost, 'f', 2, 64), strconv.Itoa(r.Records))
	}
	for _, r := range rep.Rows {
		row(r)
	}
	row(rep.Total)
	return t.flush()
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// newPriceCmd is `corral price`: dollars per GPU-hour by GPU model.
func (c *cli) newPriceCmd() *cobra.Command {
	list := func(cmd *cobra.Command, _ []string) error {
		return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (usage.PriceList, error) {
			return cl.Prices(ctx)
		}, printPrices)
	}
	cmd := &cobra.Command{
		Use:   "price",
		Short: "Show or set the price of a GPU-hour per GPU model",
		Long: `A price per GPU-hour (amortised on-premises, or a cloud rate) for each GPU
model prices the usage report and the budgets in dollars. A model's price is
that of its exact name, else of the longest name contained in it, ignoring case
("H100" prices "NVIDIA H100 80GB HBM3"). Setting and removing prices is for
admins.`,
		Example: `  corral price set H100 2.49
  corral price list
  corral price unset H100`,
		Args: argsSubcommand, RunE: list,
	}
	set := &cobra.Command{
		Use: "set MODEL DOLLARS_PER_GPU_HOUR", Short: "Set a GPU model's price (admin)",
		Args: argsExactly(2, "a GPU model and a price in dollars per GPU-hour"),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.ParseFloat(args[1], 64)
			if err != nil {
				return usagef("price %q: want a number of dollars per GPU-hour", args[1])
			}
			if err := usage.ValidPrice(args[0], v); err != nil {
				return usagef("%v", err)
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (usage.PriceList, error) {
				return cl.SetPrice(ctx, args[0], v)
			}, printPrices)
		},
	}
	unset := &cobra.Command{
		Use: "unset MODEL", Short: "Remove a GPU model's price (admin)",
		Args: argsExactly(1, "a GPU model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (usage.PriceList, error) {
				return cl.UnsetPrice(ctx, args[0])
			}, printPrices)
		},
	}
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "Show every price", Args: argsExactly(0, "no arguments"), RunE: list}, set, unset)
	return cmd
}

// printPrices writes one row per GPU model, by name.
func printPrices(w io.Writer, l usage.PriceList) error {
	t := newTable(w, "MODEL", "DOLLARS/GPU-HOUR")
	keys := make([]string, 0, len(l.Prices))
	for k := range l.Prices {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.row(k, strconv.FormatFloat(l.Prices[k], 'f', -1, 64))
	}
	return t.flush()
}

// newBudgetCmd is `corral budget`: monthly budgets per user or project.
func (c *cli) newBudgetCmd() *cobra.Command {
	printOne := func(w io.Writer, st usage.BudgetStatus) error {
		return printBudgets(w, []usage.BudgetStatus{st})
	}
	list := func(cmd *cobra.Command, _ []string) error {
		return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (usage.BudgetList, error) {
			return cl.Budgets(ctx)
		}, func(w io.Writer, l usage.BudgetList) error { return printBudgets(w, l.Budgets) })
	}
	kindOK := func(kind string) error {
		if kind != usage.BudgetUser && kind != usage.BudgetProject {
			return usagef("%q: the first argument is user or project", kind)
		}
		return nil
	}
	cmd := &cobra.Command{
		Use:   "budget",
		Short: "Show or set monthly budgets of users and projects",
		Long: `A budget limits a user's or project's usage per calendar month (UTC), in
GPU-hours or dollars (at corral price's prices). At 50%, 80% and 100% it
notifies (kinds budget_50, budget_80, budget_100, once each per month) the
user's or project's notification endpoints and the cluster's; at 100% it takes
its action: notify (nothing more), preemptible (new jobs become batch work at
the lowest priority, which higher-ranked work preempts) or hold (queued jobs
wait with reason budget_exhausted until next month or an admin's release).
Without --action, the server's --budget-action applies. Setting, removing and
releasing budgets is for admins.`,
		Example: `  corral budget set project vision --gpu-hours 500
  corral budget set user ana --dollars 1200 --action hold
  corral budget list
  corral budget release project vision
  corral budget unset project vision`,
		Args: argsSubcommand, RunE: list,
	}
	var req usage.BudgetRequest
	set := &cobra.Command{
		Use: "set user|project NAME (--gpu-hours N | --dollars N) [--action notify|preemptible|hold]", Short: "Set a monthly budget (admin)",
		Args: argsExactly(2, "user or project, and a name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kindOK(args[0]); err != nil {
				return err
			}
			if (req.GPUHours > 0) == (req.Dollars > 0) {
				return usagef("give exactly one of --gpu-hours and --dollars, above 0")
			}
			if req.Action != "" && !usage.ValidAction(req.Action) {
				return usagef("--action %q: want notify, preemptible or hold", req.Action)
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (usage.BudgetStatus, error) {
				return cl.SetBudget(ctx, args[0], args[1], req)
			}, printOne)
		},
	}
	set.Flags().Float64Var(&req.GPUHours, "gpu-hours", 0, "the month's limit in GPU-hours")
	set.Flags().Float64Var(&req.Dollars, "dollars", 0, "the month's limit in dollars")
	set.Flags().StringVar(&req.Action, "action", "", "at 100%: notify, preemptible or hold (default: the server's --budget-action)")
	unset := &cobra.Command{
		Use: "unset user|project NAME", Short: "Remove a budget (admin)",
		Args: argsExactly(2, "user or project, and a name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kindOK(args[0]); err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			if err := cl.UnsetBudget(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "budget of %s %s removed\n", args[0], args[1])
			return nil
		},
	}
	release := &cobra.Command{
		Use: "release user|project NAME", Short: "Lift an exhausted budget's action until next month (admin)",
		Args: argsExactly(2, "user or project, and a name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kindOK(args[0]); err != nil {
				return err
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (usage.BudgetStatus, error) {
				return cl.ReleaseBudget(ctx, args[0], args[1])
			}, printOne)
		},
	}
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "Show every budget with its month-to-date use", Args: argsExactly(0, "no arguments"), RunE: list}, set, unset, release)
	return cmd
}

func printBudgets(w io.Writer, bs []usage.BudgetStatus) error {
	t := newTable(w, "KIND", "NAME", "LIMIT", "USED", "PERCENT", "ACTION", "STATE", "PERIOD")
	for _, b := range bs {
		limit, used := fmtFloat(b.GPUHours)+" GPU-h", fmtFloat(b.UsedGPUHours)+" GPU-h"
		if b.Dollars > 0 {
			limit, used = "$"+fmtFloat(b.Dollars), "$"+fmtFloat(b.UsedDollars)
		}
		state := "ok"
		switch {
		case b.Exhausted && b.Released:
			state = "exhausted, released"
		case b.Exhausted:
			state = "exhausted"
		}
		t.row(b.Kind, b.Name, limit, used, fmt.Sprintf("%.0f%%", b.Percent), b.EffectiveAction, state, b.Period)
	}
	return t.flush()
}
