package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/spf13/cobra"
)

// cancelConfirmAbove is how many jobs one cancel may take without --yes.
const cancelConfirmAbove = 10

// cancelFilter selects the jobs corral cancel takes when no ids are given.
type cancelFilter struct {
	user, name, state, project string
	scope                      ownerScope // -A (mine.go)
}

func (f cancelFilter) empty() bool {
	return f.user == "" && f.name == "" && f.state == "" && f.project == ""
}

// cancelResult is corral cancel's -o json answer when it took several jobs
// (or a filter): the jobs as the server answered, and the ids it refused.
type cancelResult struct {
	Canceled []api.Job     `json:"canceled"`
	Failed   []cancelError `json:"failed"`
}

// cancelEach cancels each job in turn, recording the outcome in r and
// appending a line for each to lines.
func (r *cancelResult) cancelEach(ctx context.Context, cl *client.Client, ids []string, grace time.Duration, lines []string) []string {
	for _, id := range ids {
		job, err := cl.Cancel(ctx, id, grace)
		if err != nil {
			r.Failed = append(r.Failed, cancelError{JobID: id, Error: describe(err)})
			lines = append(lines, fmt.Sprintf("job %s: %s", id, describe(err)))
			continue
		}
		r.Canceled = append(r.Canceled, job)
		lines = append(lines, cancelLine(job, grace))
	}
	return lines
}

type cancelError struct {
	JobID string `json:"job_id"`
	Error string `json:"error"`
}

func (c *cli) newCancelCmd() *cobra.Command {
	var (
		grace time.Duration
		f     cancelFilter
		yes   bool
	)
	cmd := &cobra.Command{
		Use:   "cancel [ID...] [--user U] [--name N] [--state S] [--project P]",
		Short: "Cancel queued or running jobs, by id or by filter",
		Long: `Cancel jobs. A queued job is canceled at once; a running one gets SIGTERM,
then SIGKILL once the grace period is over.

Give jobs by number (1234; an array task 1234_7), name (one of your jobs),
id or unique id prefix of 6 or more characters, or filters instead:
--user, --name, --state and --project select the unfinished jobs (queued,
scheduled, allocating, running) that match them all: your own jobs only,
unless --user names whose or -A/--all-users takes everyone's that you may
cancel (yours, your administered projects', or all with an admin token). More than 10 jobs are
canceled only with --yes; without it corral cancel says how many matched and
cancels nothing. Each job is canceled through DELETE /queue/{id}, so each is
authorized and audited on its own; one line is printed per job, then a
summary, and the exit code is 1 if any cancel failed. A job array's id
cancels every unfinished task of the array (DELETE /arrays/{id}); each task
counts toward the 10.`,
		Example: `  corral cancel 1234 1235_7
  corral cancel --name sweep --yes
  corral cancel --user alice --state queued`,
		Args: cobra.ArbitraryArgs, // job IDs, or none with a filter: RunE checks which
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return usagef("--grace must not be negative")
			}
			if len(args) == 0 && f.empty() {
				return usagef("missing the job ID (or a filter: --user, --name, --state, --project)")
			}
			if len(args) > 0 && !f.empty() {
				return usagef("give job IDs or filters (--user, --name, --state, --project), not both")
			}
			if f.state != "" {
				if s := api.State(f.state); !s.Valid() || s.Terminal() {
					return usagef("--state %q: want an unfinished state (queued, scheduled, allocating, running)", f.state)
				}
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			if len(args) > 0 { // an array id cancels its tasks (arrays.go)
				arrays, jobs, err := cancelArrays(cmd.Context(), cl, uniq(args))
				if err != nil {
					return err
				}
				if len(arrays) > 0 {
					return c.cancelWithArrays(cmd.Context(), cl, arrays, jobs, grace, yes)
				}
			}
			if len(args) == 1 {
				return c.cancelOne(cmd.Context(), cl, args[0], grace)
			}
			ids := uniq(args)
			if len(ids) == 0 {
				if ids, err = c.matchUnfinished(cmd.Context(), cl, f); err != nil {
					return err
				}
				if len(ids) == 0 {
					if c.json() {
						return writeJSON(c.stdout, cancelResult{Canceled: []api.Job{}, Failed: []cancelError{}})
					}
					_, err := fmt.Fprintln(c.stdout, "no unfinished jobs match")
					return err
				}
			}
			if len(ids) > cancelConfirmAbove && !yes {
				shown := ids[:min(len(ids), 5)]
				more := ""
				if len(ids) > len(shown) {
					more = fmt.Sprintf(" and %d more", len(ids)-len(shown))
				}
				return exitCodeError{code: exitError, msg: fmt.Sprintf(
					"would cancel %d jobs (%s%s); more than %d are canceled only with --yes: nothing was canceled",
					len(ids), strings.Join(shown, ", "), more, cancelConfirmAbove)}
			}
			return c.cancelMany(cmd.Context(), cl, ids, grace)
		},
	}
	fl := cmd.Flags()
	durationVar(fl, &grace, "grace", 0, "time between SIGTERM and SIGKILL for a running job (default: the server's)")
	fl.StringVar(&f.user, "user", "", "cancel this user's unfinished jobs")
	fl.StringVar(&f.name, "name", "", "cancel the unfinished jobs of this name")
	fl.StringVar(&f.state, "state", "", "cancel the jobs in this unfinished state (queued, scheduled, allocating, running)")
	fl.StringVar(&f.project, "project", "", "cancel this project's unfinished jobs")
	fl.BoolVarP(&yes, "yes", "y", false, "cancel even when more than 10 jobs match")
	f.scope.register(fl, cancelAllUsage) // mine.go
	return cmd
}

// matchUnfinished lists the ids of the unfinished jobs f selects, oldest
// first, asking the server once per unfinished state so that finished jobs
// never crowd them out of a page. Without --user or -A they are the
// caller's own (mine=true); with either, those the caller may not cancel
// are left out, and said so on stderr.
func (c *cli) matchUnfinished(ctx context.Context, cl *client.Client, f cancelFilter) ([]string, error) {
	mine := f.scope.mine(f.user)
	allowed := func(api.Job) bool { return true }
	if !mine {
		var err error
		if allowed, err = mayCancel(ctx, cl); err != nil { // mine.go
			return nil, err
		}
	}
	var left []string // others' jobs the caller may not cancel
	var states []api.State
	if f.state != "" {
		states = []api.State{api.State(f.state)}
	} else {
		for _, s := range api.States {
			if !s.Terminal() {
				states = append(states, s)
			}
		}
	}
	var jobs []api.Job
	for _, s := range states {
		list, err := cl.Jobs(ctx, client.JobFilter{State: s, User: f.user, Project: f.project, Name: f.name, Limit: 100000, Mine: mineValue(mine)})
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, list.Jobs...)
	}
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		// The server filters; checking again keeps an older server, one
		// that ignores name=, from widening the selection.
		if (f.name != "" && j.Name != f.name) || (f.user != "" && j.User != f.user) ||
			(f.project != "" && j.Project != f.project) || j.State.Terminal() {
			continue
		}
		if !allowed(j) {
			if !slices.Contains(left, j.ID) {
				left = append(left, j.ID)
			}
			continue
		}
		ids = append(ids, j.ID)
	}
	if len(left) > 0 {
		fmt.Fprintf(c.stderr, "corral: %d matching jobs of others are left out: you may cancel only your own, your administered projects', or any with an admin token\n", len(left))
	}
	slices.Sort(ids) // ids begin with their submission time
	return slices.Compact(ids), nil
}

// cancelOne is corral cancel ID: the job as the server answers it, or its
// error.
func (c *cli) cancelOne(ctx context.Context, cl *client.Client, id string, grace time.Duration) error {
	job, err := cl.Cancel(ctx, id, grace)
	if err != nil {
		return err
	}
	return c.emit(job, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, cancelLine(job, grace))
		return err
	})
}

// cancelMany cancels each job in turn, printing a line for each and a
// summary; it fails when any cancel did.
func (c *cli) cancelMany(ctx context.Context, cl *client.Client, ids []string, grace time.Duration) error {
	res := cancelResult{Canceled: []api.Job{}, Failed: []cancelError{}}
	lines := res.cancelEach(ctx, cl, ids, grace, nil)
	lines = append(lines, fmt.Sprintf("%d of %d jobs canceled or being stopped, %d failed",
		len(res.Canceled), len(ids), len(res.Failed)))
	err := c.emit(res, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
		return err
	})
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return exitCodeError{code: exitError, msg: fmt.Sprintf("%d of %d cancels failed", len(res.Failed), len(ids))}
	}
	return nil
}

// cancelLine says what a cancel did to job.
func cancelLine(job api.Job, grace time.Duration) string {
	switch {
	case job.State == api.StateCanceled:
		return fmt.Sprintf("canceled job %s", job.ID)
	case job.CancelRequested:
		after := "the grace period"
		if grace > 0 {
			after = grace.String()
		}
		return fmt.Sprintf("canceling job %s (%s): SIGTERM now, SIGKILL after %s", job.ID, job.State, after)
	default:
		return fmt.Sprintf("job %s is %s", job.ID, job.State)
	}
}

// uniq is ids without repeats, in the order first given.
func uniq(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
