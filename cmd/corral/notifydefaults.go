package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// builtinDefaultsText says what the built-in notification defaults are.
const builtinDefaultsText = "the built-in defaults: fail, preempt; end when a job ran over 10 minutes"

// newNotifyDefaultsCmd is `corral notify defaults [CLASSES] [--reset]
// [--user U]`: shows or sets the caller's own notification defaults
// (GET and PUT /notify/defaults; docs/notifications.md).
func (c *cli) newNotifyDefaultsCmd() *cobra.Command {
	var user string
	var reset bool
	cmd := &cobra.Command{
		Use:   "defaults [CLASSES|default]",
		Short: "Show or set what your jobs tell when they have no --notify of their own",
		Long: `Without an argument, shows your notification defaults. With one, sets them:
the classes your jobs tell when submitted without --notify, in --notify's
grammar (a comma-separated list of begin, end, fail and preempt, or all, or
none). "default" or --reset goes back to the built-in defaults: fail and
preempt for every job, end for jobs that ran over 10 minutes. Your own
"end" means every end, however short the job. A job's own --notify still
overrides them. They apply from now on to the events of every job of yours
without --notify, queued and running ones too, and to your arrays' summaries.`,
		Example: `  corral notify defaults
  corral notify defaults begin,end,fail
  corral notify defaults --reset
  corral notify defaults none --user ana   # admins: another user's`,
		Args: argsAtMost(1, "the classes (one argument, comma-separated)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := ""
			switch {
			case reset && len(args) > 0:
				return usagef("--reset takes no classes")
			case reset:
				set = api.NotifyDefault
			case len(args) == 1:
				set = strings.TrimSpace(args[0])
				if !strings.EqualFold(set, api.NotifyDefault) {
					n, err := api.ParseNotify(set)
					if err != nil {
						return usagef("%w", err)
					}
					if n == "" {
						return usagef("the classes are empty; want begin, end, fail, preempt, all, none or default")
					}
				}
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.NotifyDefaults, error) {
				if set == "" {
					return cl.NotifyDefaults(ctx, user)
				}
				return cl.SetNotifyDefaults(ctx, user, set)
			}, func(w io.Writer, d api.NotifyDefaults) error {
				now := c.now()
				if d.Builtin {
					_, err := fmt.Fprintf(w, "%s: %s\n", d.User, builtinDefaultsText)
					return err
				}
				by := ""
				if d.UpdatedAt != nil {
					by = fmt.Sprintf(" (set by %s, %s)", d.UpdatedBy, fmtTime(*d.UpdatedAt, now))
				}
				_, err := fmt.Fprintf(w, "%s: %s%s\n", d.User, d.Notify, by)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&reset, "reset", false, "go back to the built-in defaults (as the argument default)")
	cmd.Flags().StringVar(&user, "user", "", "whose defaults (admins only; default: yours)")
	return cmd
}
