package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// dependHelp is the help of --after (and its Slurm alias --dependency).
const dependHelp = `start only after other jobs, in Slurm's grammar: afterok:ID[:ID...] (completed), afternotok:ID (failed or canceled), afterany:ID (ended), after:ID (started), aftercorr:ARRAY (task i after task i), singleton (one job of this user and name at a time); ',' all of, '?' any of. IDs may be unique prefixes or array ids`

// registerDependFlags adds --after and its alias --dependency/-d, both
// setting *after (submit and run).
func registerDependFlags(fl *pflag.FlagSet, after *string) {
	fl.StringVar(after, "after", "", dependHelp)
	fl.StringVarP(after, "dependency", "d", "", "the same as --after (Slurm's name)")
}

// newDependCmd is corral depend: change a queued job's dependencies.
func (c *cli) newDependCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "depend ID EXPR",
		Short: "Change a queued job's dependencies (as submit --after)",
		Long: `Replace the dependencies of a job that is still queued with EXPR, in the grammar
of corral submit --after; "" or none removes them. A change that would make a
cycle of jobs waiting for each other is refused, as are unknown ids.`,
		Example: `  corral depend 01JABC... afterok:01JXYZ...
  corral depend 01JABC... none`,
		Args: argsExactly(2, "the job ID and a dependency expression (\"none\" removes it)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			expr := args[1]
			if expr == "none" {
				expr = ""
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Job, error) {
				return cl.SetDependency(ctx, args[0], expr)
			}, func(w io.Writer, job api.Job) error {
				if job.DependsOn == "" {
					_, err := fmt.Fprintf(w, "job %s depends on nothing now\n", job.ID)
					return err
				}
				_, err := fmt.Fprintf(w, "job %s now depends on %s\n", job.ID, job.DependsOn)
				return err
			})
		},
	}
}

// queueEstStart is a corral queue row's EST.START: "(dependency)" or
// "(dependency_never_satisfied)" for a job held by its dependencies (it
// has no estimate; -l says what it waits for), else when it should start:
// "14:10 to 15:40" where learned run times give a range.
func queueEstStart(j api.QueuedJob, now time.Time) string {
	switch j.PendingReason {
	case api.ReasonDependency, api.ReasonDependencyNeverSatisfied:
		return "(" + j.PendingReason + ")"
	}
	return fmtEstStart(j.EstimatedWaitTime, j.EstimatedStartTime, j.EstimatedStartLow, j.EstimatedStartHigh, now)
}
