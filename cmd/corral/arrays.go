package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// Job arrays in the CLI (docs/arrays.md): corral submit --array, corral
// array show|throttle, and the one row per array of corral queue and
// corral jobs.

func (c *cli) newArrayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "array",
		Short: "Show a job array, or change how many of its tasks run at once",
		Long: `A job array is many tasks of one submission (corral submit --array 0-99%8):
each task is a job ARRAYID_INDEX with its own state, logs and retries, and
CORRAL_ARRAY_JOB_ID, CORRAL_ARRAY_TASK_ID, CORRAL_ARRAY_TASK_COUNT,
CORRAL_ARRAY_TASK_MIN and CORRAL_ARRAY_TASK_MAX in its environment.
corral cancel ARRAYID cancels every unfinished task.`,
	}
	cmd.AddCommand(c.newArrayShowCmd(), c.newArrayThrottleCmd())
	return cmd
}

func (c *cli) newArrayShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show ARRAYID",
		Short:   "Show a job array: its spec and its tasks' counts by state",
		Example: "  corral array show 01jq3x7k2m",
		Args:    argsExactly(1, "the array's ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Array, error) {
				return cl.Array(ctx, args[0])
			}, func(w io.Writer, a api.Array) error { return printArray(w, a, c.now()) })
		},
	}
}

func (c *cli) newArrayThrottleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "throttle ARRAYID N",
		Short: "Let at most N tasks of a job array run at once (0: no limit)",
		Long: `Set how many tasks of a job array may be active (scheduled, allocating or
running) at once; 0 lifts the limit. The change takes effect at the next
scheduling cycle; tasks already running are never stopped when N is lowered.`,
		Example: "  corral array throttle 01jq3x7k2m 32",
		Args:    argsExactly(2, "the array's ID and N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return usagef("N %q: want a whole number, 0 (no limit) or more", args[1])
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Array, error) {
				return cl.SetThrottle(ctx, args[0], n)
			}, func(w io.Writer, a api.Array) error {
				_, err := fmt.Fprintf(w, "array %s: %s\n", a.ID, throttleText(a.Throttle))
				return err
			})
		},
	}
}

func throttleText(n int) string {
	if n == 0 {
		return "no limit on tasks at once"
	}
	return fmt.Sprintf("at most %d tasks at once", n)
}

// printArray writes corral array show's answer.
func printArray(w io.Writer, a api.Array, now time.Time) error {
	t := newTable(w)
	t.row("Number:", arrayNumber(a)) // numbers.go
	t.row("ID:", a.ID)
	if a.Name != "" {
		t.row("Name:", a.Name)
	}
	t.row("User:", a.User+" (project "+a.Project+")")
	t.row("Array:", fmt.Sprintf("%s: %d tasks, %d to %d", a.Array, a.TaskCount, a.TaskMin, a.TaskMax))
	t.row("Throttle:", throttleText(a.Throttle))
	t.row("State:", string(a.State))
	t.row("Tasks:", countsText(a.Counts))
	t.row("GPUs:", fmtGPUs(a.GPUCount, a.Nodes)+" per task")
	t.row("Submitted:", fmtTime(a.SubmittedAt, now))
	t.row("Command:", a.Command)
	return t.flush()
}

// countsText is an array's counts: queued, running (active), completed
// and failed always, canceled when there are some.
func countsText(c api.ArrayCounts) string {
	s := fmt.Sprintf("%d queued, %d running, %d completed, %d failed", c.Queued, c.Active(), c.Completed, c.Failed)
	if c.Canceled > 0 {
		s += fmt.Sprintf(", %d canceled", c.Canceled)
	}
	return s
}

// arraySubmitted prints corral submit --array's answer: the array, how
// many tasks, and the first.
func (c *cli) arraySubmitted(ctx context.Context, cl *client.Client, job api.Job) (api.Array, error) {
	a, err := cl.Array(ctx, job.ArrayJobID)
	if err != nil {
		return api.Array{}, err
	}
	a.Tasks = nil
	return a, c.emit(api.SubmitAnswer{Job: job, ArraySummary: &a}, func(w io.Writer) error {
		id, name := a.ID, a.ID // the tasks by number where the array has one (numbers.go)
		if a.Number > 0 {
			name = strconv.FormatInt(a.Number, 10)
			id += " (number " + name + ")"
		}
		_, err := fmt.Fprintf(w, "submitted array %s: %d tasks %s_%d to %s_%d, %s\n", id, a.TaskCount, name, a.TaskMin, name, a.TaskMax, throttleText(a.Throttle))
		return err
	})
}

// arrayWait is corral submit --array --wait: wait for every task, then
// exit as corral wait does over them.
func (c *cli) arrayWait(ctx context.Context, cl *client.Client, id string, retry time.Duration) error {
	a, err := cl.Array(ctx, id)
	if err != nil {
		return err
	}
	jobs := make([]api.Job, 0, len(a.Tasks))
	for _, i := range a.Tasks {
		j, err := cl.WaitJob(ctx, fmt.Sprintf("%s_%d", a.ID, i), c.waitOptions(retry))
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	if code := jobsExitCode(jobs); code != exitOK {
		return exitCodeError{code: code}
	}
	fmt.Fprintf(c.stderr, "corral: all %d tasks of array %s completed\n", len(jobs), a.ID)
	return nil
}

// cancelArrays takes the ids that name job arrays out of ids and returns
// them with their unfinished task counts; the rest are left for the job
// cancel. A 404 means the id is no array.
func cancelArrays(ctx context.Context, cl *client.Client, ids []string) (arrays []api.Array, jobs []string, err error) {
	for _, id := range ids {
		if strings.Contains(id, "_") {
			jobs = append(jobs, id) // a task
			continue
		}
		a, err := cl.Array(ctx, id)
		if errors.Is(err, api.ErrNotFound) {
			jobs = append(jobs, id)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		arrays = append(arrays, a)
	}
	return arrays, jobs, nil
}

// collapseQueue returns the queue's rows with each array's tasks as one
// row (its first task's, with ID the array's and no task index), unless
// expand; only, when set, keeps that array's tasks alone, one row each.
func collapseQueue(rows []api.QueuedJob, expand bool, only string) []api.QueuedJob {
	out := make([]api.QueuedJob, 0, len(rows))
	seen := map[string]bool{}
	for _, q := range rows {
		switch {
		case only != "":
			if q.ArrayJobID == only {
				out = append(out, q)
			}
		case q.ArrayJobID == "" || expand:
			out = append(out, q)
		case !seen[q.ArrayJobID]:
			seen[q.ArrayJobID] = true
			q.ID, q.ArrayTaskID = q.ArrayJobID, nil
			out = append(out, q)
		}
	}
	return out
}

// collapseJobs is collapseQueue for corral jobs: each array's tasks as one
// row where its newest task is, the state the array's.
func collapseJobs(list api.JobList, expand bool) []api.Job {
	if expand {
		return list.Jobs
	}
	states := map[string]api.State{}
	for _, a := range list.Arrays {
		states[a.ID] = a.State
	}
	out := make([]api.Job, 0, len(list.Jobs))
	seen := map[string]bool{}
	for _, j := range list.Jobs {
		if j.ArrayJobID == "" {
			out = append(out, j)
			continue
		}
		if seen[j.ArrayJobID] {
			continue
		}
		seen[j.ArrayJobID] = true
		j.ID, j.ArrayTaskID = j.ArrayJobID, nil
		if s, ok := states[j.ArrayJobID]; ok {
			j.State = s
		}
		j.StartedAt, j.FinishedAt, j.ExitCode, j.CancelRequested, j.Preempting, j.Idle = nil, nil, nil, false, false, false
		out = append(out, j)
	}
	return out
}

// isArrayRow reports whether a collapsed row stands for an array.
func isArrayRow(arrayJobID string, task *int) bool { return arrayJobID != "" && task == nil }

// arrayCell is the TASKS cell of an array's row: its expression (with
// the throttle as it is now) and counts.
func arrayCell(arrays []api.Array, id string) string {
	for _, a := range arrays {
		if a.ID == id {
			return fmt.Sprintf("[%s] %s", specNow(a), countsText(a.Counts))
		}
	}
	return "-"
}

// specNow is the array's expression with its current throttle: the
// indexes as submitted, then %N unless the throttle was lifted.
func specNow(a api.Array) string {
	body, _, _ := strings.Cut(a.Array, "%")
	if a.Throttle > 0 {
		return fmt.Sprintf("%s%%%d", body, a.Throttle)
	}
	return body
}

// anyArrayRow reports whether a table will have array rows (and so a
// TASKS column).
func anyArrayRow[T any](rows []T, of func(T) (string, *int)) bool {
	for _, r := range rows {
		if id, task := of(r); isArrayRow(id, task) {
			return true
		}
	}
	return false
}

// arrayCancelResult is corral cancel's -o json answer when an array was
// among the ids: the arrays as canceled, and the jobs as cancelMany's.
type arrayCancelResult struct {
	Arrays []api.Array `json:"arrays"`
	cancelResult
}

// cancelWithArrays is corral cancel when some ids name job arrays: each
// array's unfinished tasks count toward the --yes threshold; arrays are
// canceled through DELETE /arrays/{id}, the other ids as jobs.
func (c *cli) cancelWithArrays(ctx context.Context, cl *client.Client, arrays []api.Array, jobs []string, grace time.Duration, yes bool) error {
	total := len(jobs)
	for _, a := range arrays {
		total += a.Counts.Unfinished()
	}
	if total > cancelConfirmAbove && !yes {
		return exitCodeError{code: exitError, msg: fmt.Sprintf(
			"would cancel %d jobs (array %s: %d unfinished tasks); more than %d are canceled only with --yes: nothing was canceled",
			total, arrays[0].ID, arrays[0].Counts.Unfinished(), cancelConfirmAbove)}
	}
	res := arrayCancelResult{Arrays: []api.Array{}, cancelResult: cancelResult{Canceled: []api.Job{}, Failed: []cancelError{}}}
	var lines []string
	for _, a := range arrays {
		got, err := cl.CancelArray(ctx, a.ID, grace)
		if err != nil {
			res.Failed = append(res.Failed, cancelError{JobID: a.ID, Error: describe(err)})
			lines = append(lines, fmt.Sprintf("array %s: %s", a.ID, describe(err)))
			continue
		}
		res.Arrays = append(res.Arrays, got)
		lines = append(lines, fmt.Sprintf("canceled array %s: %s", got.ID, countsText(got.Counts)))
	}
	lines = res.cancelEach(ctx, cl, jobs, grace, lines)
	err := c.emit(res, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
		return err
	})
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return exitCodeError{code: exitError, msg: fmt.Sprintf("%d of %d cancels failed", len(res.Failed), len(arrays)+len(jobs))}
	}
	return nil
}

// isArrayError reports whether err is a job route's answer that the id
// names a job array, not a job (404 is_array).
func isArrayError(err error) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == "is_array"
}

// arrayTaskIDs returns the ids of every task of the array id names.
func arrayTaskIDs(ctx context.Context, cl *client.Client, id string) ([]string, error) {
	a, err := cl.Array(ctx, id)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(a.Tasks))
	for i, idx := range a.Tasks {
		ids[i] = fmt.Sprintf("%s_%d", a.ID, idx)
	}
	return ids, nil
}
