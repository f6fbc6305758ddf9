package main

import (
	"context"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// newQuotaCmd is `corral quota`: guaranteed GPUs per user and project.
func (c *cli) newQuotaCmd() *cobra.Command {
	return c.limitCmd("quota", "GPUS", "Show or set the GPUs guaranteed to a user or project",
		`A quota guarantees a user or project that many GPUs. Beyond it a job only
borrows GPUs that are idle, and borrowed GPUs are the first taken back.`,
		`  corral quota
  corral quota set project vision 16
  corral quota rm user ana`,
		func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return usagef("GPUS %q: want a whole number of GPUs, 0 or more", s)
			}
			return nil
		},
		func(kind, name string, value *string) api.PoliciesUpdate {
			var v *int
			if value != nil {
				n, _ := strconv.Atoi(*value)
				v = &n
			}
			q := &api.QuotasUpdate{}
			if kind == "user" {
				q.Users = map[string]*int{name: v}
			} else {
				q.Projects = map[string]*int{name: v}
			}
			return api.PoliciesUpdate{Quotas: q}
		},
		func(w io.Writer, p api.Policies) error {
			return printLimits(w, "quotas (guaranteed GPUs)", p.Quotas.Users, p.Quotas.Projects, strconv.Itoa)
		})
}

// newWeightCmd is `corral weight`: fair-share weights.
func (c *cli) newWeightCmd() *cobra.Command {
	return c.limitCmd("weight", "W", "Show or set the fair-share weight of a user or project",
		`Fair share compares usage divided by weight: a user with weight 2 may use
twice the GPU time of one with weight 1 (the default) before ranking below them.`,
		`  corral weight
  corral weight set user ana 2
  corral weight rm project vision`,
		func(s string) error {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f <= 0 {
				return usagef("W %q: want a number above 0", s)
			}
			return nil
		},
		func(kind, name string, value *string) api.PoliciesUpdate {
			var v *float64
			if value != nil {
				f, _ := strconv.ParseFloat(*value, 64)
				v = &f
			}
			w := &api.WeightsUpdate{}
			if kind == "user" {
				w.Users = map[string]*float64{name: v}
			} else {
				w.Projects = map[string]*float64{name: v}
			}
			return api.PoliciesUpdate{Weights: w}
		},
		func(w io.Writer, p api.Policies) error {
			return printLimits(w, "weights", p.Weights.Users, p.Weights.Projects, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) })
		})
}

// limitCmd builds a list / set / rm command over one per-user and
// per-project setting of the policies.
func (c *cli) limitCmd(use, valueName, short, long, example string,
	check func(string) error,
	update func(kind, name string, value *string) api.PoliciesUpdate,
	print func(io.Writer, api.Policies) error) *cobra.Command {
	show := func(cmd *cobra.Command, _ []string) error {
		return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Policies, error) {
			return cl.Policies(ctx)
		}, print)
	}
	apply := func(cmd *cobra.Command, u api.PoliciesUpdate) error {
		return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Policies, error) {
			return cl.SetPolicies(ctx, u)
		}, print)
	}
	kindOK := func(kind string) error {
		if kind != "user" && kind != "project" {
			return usagef("%q: the first argument is user or project", kind)
		}
		return nil
	}
	cmd := &cobra.Command{Use: use, Short: short, Long: long, Example: example, Args: argsSubcommand, RunE: show}
	set := &cobra.Command{
		Use: "set user|project NAME " + valueName, Short: "Set one " + use,
		Args: argsExactly(3, "user or project, a name and a value"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kindOK(args[0]); err != nil {
				return err
			}
			if err := check(args[2]); err != nil {
				return err
			}
			return apply(cmd, update(args[0], args[1], &args[2]))
		},
	}
	rm := &cobra.Command{
		Use: "rm user|project NAME", Short: "Remove one " + use,
		Args: argsExactly(2, "user or project, and a name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := kindOK(args[0]); err != nil {
				return err
			}
			return apply(cmd, update(args[0], args[1], nil))
		},
	}
	list := &cobra.Command{Use: "list", Short: "Show every " + use, Args: argsExactly(0, "no arguments"), RunE: show}
	cmd.AddCommand(list, set, rm)
	return cmd
}
