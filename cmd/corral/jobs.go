package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/timespec"
)

func (c *cli) newQueueCmd() *cobra.Command {
	var o queueOpts // mine.go
	cmd := &cobra.Command{
		Use:   "queue [ARRAYID]",
		Short: "List your queued and running jobs, the queue in scheduling order",
		Long: `List your jobs that have not ended: those started (scheduled, allocating,
running), then those queued, in scheduling order with each one's place in
the whole queue. -A/--all-users lists everyone's, --user U one user's, and
--state narrows to some states (--state queued: the queue alone).

A job array is one row, with its tasks' counts (queued, running,
completed, failed); --expand lists every task, and corral queue ARRAYID
lists that array's queued tasks.`,
		Example: `  corral queue              # your jobs: running, then queued
  corral queue -A -l        # everyone's, with why each queued job waits
  corral queue --state running --user ana`,
		Args: argsAtMost(1, "one array ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.runQueue(cmd.Context(), args, o) // mine.go
		},
	}
	o.register(cmd.Flags())
	return cmd
}

func (c *cli) printQueue(w io.Writer, q api.QueueResponse, long bool) error {
	now := c.now()
	if len(q.QueuedJobs) == 0 {
		fmt.Fprintln(w, "no jobs queued")
	} else {
		headers := []string{"NUM", "POS", "ID", "USER", "PRI", "GPUS", "WAITED", "EST.START", "NAME"}
		if long {
			headers = append(headers, "REASON")
		}
		arrays := anyArrayRow(q.QueuedJobs, func(j api.QueuedJob) (string, *int) { return j.ArrayJobID, j.ArrayTaskID })
		if arrays {
			headers = append(headers, "TASKS")
		}
		t := newTable(w, headers...)
		ids := make([]string, len(q.QueuedJobs))
		for i, j := range q.QueuedJobs {
			ids[i] = j.ID
		}
		short := shortIDs(ids, shortIDMin)
		for i, j := range q.QueuedJobs {
			if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
				short[i] = j.ID // an array's row shows its whole id (arrays.go)
			}
		}
		for i, j := range q.QueuedJobs {
			waited := time.Duration(j.WaitedSeconds * float64(time.Second))
			if waited == 0 && !j.QueuedAt.IsZero() {
				waited = now.Sub(j.QueuedAt)
			}
			row := []string{numCell(j.Number, j.ArrayTaskID), strconv.Itoa(j.QueuePosition), short[i], j.User, j.Priority.String(),
				fmtGPURange(j.RequestedGPUsMin, perNodeGPUs(j.RequestedGPUs, j.Nodes), j.Nodes), fmtDuration(waited),
				queueEstStart(j, now), clip(j.Name, 32)}
			if long {
				reason := j.PendingMessage
				if reason == "" {
					reason = cmp.Or(j.PendingCause, j.PendingReason)
				}
				row = append(row, reason)
			}
			if arrays {
				cell := "-"
				if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
					cell = arrayCell(q.Arrays, j.ArrayJobID)
				}
				row = append(row, cell)
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	s := q.Statistics
	_, err := fmt.Fprintf(w, "%d queued, %d running; wait avg %s, p50 %s, p95 %s; %.1f jobs/h started\n",
		s.TotalQueued, s.TotalRunning, fmtSeconds(s.AverageWaitTime), fmtSeconds(s.WaitTimeP50),
		fmtSeconds(s.WaitTimeP95), s.QueueThroughput)
	return err
}

func (c *cli) newJobsCmd() *cobra.Command {
	var (
		state, usr, project, name, since string
		limit                            int
		expand                           bool
		pg                               jobPaging  // pages.go
		scope                            ownerScope // mine.go
	)
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List your jobs, newest first (-A: everyone's)",
		Example: `  corral jobs --state failed --since 24h
  corral jobs -A --name sweep                # everyone's jobs of that name
  corral jobs --user alice --limit 20
  corral jobs --name sweep --state running`,
		Args: argsExactly(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := client.JobFilter{State: api.State(state), User: usr, Project: project, Name: name, Limit: limit, Mine: scope.list(usr)}
			if state != "" && !f.State.Valid() {
				return usagef("--state %q: want one of %s", state, stateNames())
			}
			if limit < 0 {
				return usagef("--limit must not be negative")
			}
			if since != "" {
				t, err := parseSince(since, c.now())
				if err != nil {
					return usagef("--since: %w", err)
				}
				f.Since = t
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.JobList, error) {
				return pg.list(ctx, c, cl, f) // pages.go: --all, --cursor, --until
			}, func(w io.Writer, list api.JobList) error {
				if err := c.printJobs(w, collapseJobs(list, expand), list.Arrays); err != nil { // arrays.go
					return err
				}
				return pg.footer(w, list)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&state, "state", "", "only jobs in this state ("+stateNames()+")")
	fl.StringVar(&usr, "user", "", "only this user's jobs")
	fl.StringVar(&project, "project", "", "only this project's jobs")
	fl.StringVar(&name, "name", "", "only the jobs of this name (exactly)")
	fl.StringVar(&since, "since", "", "only jobs submitted since: an age (1h, 2d) or a time (RFC 3339, 2006-01-02)")
	fl.IntVar(&limit, "limit", 0, "at most this many jobs (a page; default: the server's, 1000)")
	pg.flags(fl)
	scope.register(fl, listAllUsage) // mine.go
	fl.BoolVar(&expand, "expand", false, "list each task of a job array on its own row (default: one row per array, with its counts)")
	return cmd
}

func (c *cli) printJobs(w io.Writer, jobs []api.Job, arrayList []api.Array) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "no jobs")
		return err
	}
	now := c.now()
	headers := []string{"NUM", "ID", "NAME", "USER", "STATE", "GPUS", "SUBMITTED", "RUNTIME", "EXIT"}
	arrays := anyArrayRow(jobs, func(j api.Job) (string, *int) { return j.ArrayJobID, j.ArrayTaskID })
	if arrays {
		headers = append(headers, "TASKS")
	}
	t := newTable(w, headers...)
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	short := shortIDs(ids, shortIDMin)
	for i, j := range jobs {
		if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
			short[i] = j.ID // an array's row shows its whole id (arrays.go)
		}
	}
	for i, j := range jobs {
		row := []string{numCell(j.Number, j.ArrayTaskID), short[i], clip(j.Name, 32), j.User, jobState(j), fmtJobGPUs(j),
			fmtTime(j.SubmittedAt, now), jobRuntime(j, now), exitCode(j)}
		if arrays {
			cell := "-"
			if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
				cell = arrayCell(arrayList, j.ArrayJobID)
			}
			row = append(row, cell)
		}
		t.row(row...)
	}
	return t.flush()
}

func stateNames() string {
	names := make([]string, len(api.States))
	for i, s := range api.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseSince reads an age ("90m", "2d") or a time (RFC 3339 or a date).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	d, err := timespec.Duration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an age (%s) nor a time like 2006-01-02T15:04:05Z", s, timespec.Forms)
	}
	return now.Add(-d), nil
}

func (c *cli) newLogsCmd() *cobra.Command {
	var (
		follow        bool
		attempt, rank int
		retry         time.Duration
		lw            logWindow // --tail, --since (logtail.go)
	)
	cmd := &cobra.Command{
		Use:   "logs [-f] [--tail N] [--since D] ID",
		Short: "Print a job's output",
		Long: `Print a job's output: all of it, or its last --tail N lines, or the lines
stamped since --since D (lines that begin with a time). --tail and --since
read the log from its end by byte ranges, a chunk at a time, so the tail of a
long log comes at once. -f keeps printing until the job ends; with --tail
it starts at the tail.`,
		Example: `  corral logs JOB --tail 20
  corral logs -f --tail 0 JOB     # only what comes from now on
  corral logs JOB --since 10m     # lines stamped in the last 10 minutes`,
		Args: argsExactly(1, "the job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := client.LogsOptions{Follow: follow, Rank: rank}
			if cmd.Flags().Changed("attempt") {
				if attempt < 0 {
					return usagef("--attempt must not be negative")
				}
				o.Attempt = &attempt
			}
			if rank < 0 {
				return usagef("--rank must not be negative")
			}
			if retry < 0 {
				return usagef("--retry must not be negative")
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("tail") {
				lw.tail = -1
			} else if lw.tail < 0 {
				return usagef("--tail must not be negative")
			}
			if lw.set() {
				j, err := cl.Job(cmd.Context(), args[0]) // the full id, for -f after
				if err != nil {
					return err
				}
				part, err := c.printLogWindow(cmd.Context(), cl, fullID(j, args[0]), o, lw)
				if err != nil || !follow {
					return err
				}
				if o.Attempt == nil {
					o.From = &part.Attempt // go on to later attempts as -f does
				}
				o.Offset = part.Size
				return c.followJob(cmd.Context(), cl, fullID(j, args[0]), o, retry)
			}
			if follow { // exits as the job did, riding out a server restart (wait.go)
				return c.logsFollow(cmd.Context(), cl, args[0], o, retry)
			}
			return cl.LogsWith(cmd.Context(), args[0], o, c.stdout)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing output until the job ends, then exit with its exit code (as corral wait)")
	addRetryFlag(cmd, &retry, " with -f")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "which run of a retried job, counted from 0 like $CORRAL_ATTEMPT (0 is the first; default: the latest)")
	cmd.Flags().IntVar(&rank, "rank", 0, "which node of a multi-node gang (0 is the first)")
	cmd.Flags().IntVar(&lw.tail, "tail", 0, "print only the last N lines (with -f: then follow)")
	cmd.Flags().StringVar(&lw.since, "since", "", "print only the lines stamped since: an age (10m, 2h) or a time (RFC 3339); the log's lines must begin with a time")
	return cmd
}

func (c *cli) newPriorityCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "priority ID PRIORITY",
		Short: "Change a queued or running job's priority",
		Long: "Change the priority of a job that has not ended: a queued job's place in the queue, and for a\n" +
			"running job whether preemption may stop it for a job of higher priority. A finished job's is refused.",
		Example: "  corral priority 01JABC... high",
		Args:    argsExactly(2, "the job ID and a priority (low, normal, high, critical)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := api.ParsePriority(args[1]); err != nil {
				return usageError{err}
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Job, error) {
				return cl.SetPriority(ctx, args[0], args[1])
			}, func(w io.Writer, job api.Job) error {
				_, err := fmt.Fprintf(w, "job %s priority is now %s\n", job.ID, job.Priority)
				return err
			})
		},
	}
}
