package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// Mine by default (README, "Your jobs by default"): for a user, corral
// queue and corral jobs list their own jobs (mine=auto: the server resolves
// the token's user and role, so no second call learns who the caller is);
// admins and viewers see everyone's, as with Slurm's squeue (viewers own
// no jobs; an admin adds --user or runs corral queue --user ME). corral
// cancel's filters take the caller's own jobs whatever the role
// (mine=true), so that an admin's corral cancel --name eval takes only
// their own evals. -A/--all-users takes everyone's (that the caller may
// cancel, for cancel); --user U that user's.

// ownerScope is the -A/--all-users flag.
type ownerScope struct{ allUsers bool }

func (s *ownerScope) register(fl *pflag.FlagSet, usage string) {
	fl.BoolVarP(&s.allUsers, "all-users", "A", false, usage)
}

const (
	listAllUsage   = "everyone's jobs (default: a user's own; admins and viewers see everyone's)"
	cancelAllUsage = "filters select everyone's jobs that you may cancel (default: your own, whatever your role)"
)

// list is the mine= of a listing: "auto" unless -A, or --user names whose.
func (s ownerScope) list(user string) string {
	if s.allUsers || user != "" {
		return ""
	}
	return "auto"
}

// mine reports whether a filter takes the caller's own jobs (mine=true):
// unless -A, or --user names whose.
func (s ownerScope) mine(user string) bool { return !s.allUsers && user == "" }

// queueStates are the states corral queue lists, in its --state grammar:
// the queue, and the jobs started from it (Slurm's squeue lists PENDING and
// RUNNING alike).
var queueStates = []api.State{api.StateQueued, api.StateScheduled, api.StateAllocating, api.StateRunning}

// parseQueueStates reads corral queue's --state: a comma-separated list of
// queueStates ("" is all of them).
func parseQueueStates(v string) ([]api.State, error) {
	if strings.TrimSpace(v) == "" {
		return queueStates, nil
	}
	var out []api.State
	for _, s := range strings.Split(v, ",") {
		st := api.State(strings.ToLower(strings.TrimSpace(s)))
		if !slices.Contains(queueStates, st) {
			return nil, usagef("--state %q: want queued, scheduled, allocating or running (comma-separated); ended jobs are in corral jobs", s)
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out, nil
}

// queueOutput is corral queue's answer: GET /queue's, with the started
// jobs (scheduled, allocating, running) it lists above the queue.
type queueOutput struct {
	api.QueueResponse
	RunningJobs []api.Job `json:"running_jobs"`
}

// queueOpts are corral queue's flags.
type queueOpts struct {
	long, expand, all bool
	limit             int
	user, state       string
	scope             ownerScope
}

func (o *queueOpts) register(fl *pflag.FlagSet) {
	fl.IntVar(&o.limit, "limit", 0, "at most this many queued jobs, from the head of the queue (default: the server's, 500)")
	fl.BoolVar(&o.all, "all", false, "the whole queue, page after page")
	fl.BoolVarP(&o.long, "long", "l", false, "show why each job is pending")
	fl.BoolVar(&o.expand, "expand", false, "list each task of a job array on its own row")
	fl.StringVar(&o.user, "user", "", "this user's jobs")
	fl.StringVar(&o.state, "state", "", "only jobs in these states, comma-separated: queued, scheduled, allocating, running (default: all four)")
	o.scope.register(fl, listAllUsage)
}

// runQueue is corral queue [ARRAYID].
func (c *cli) runQueue(ctx context.Context, args []string, o queueOpts) error {
	if o.limit < 0 {
		return usagef("--limit must not be negative")
	}
	states, err := parseQueueStates(o.state)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	only := ""
	if len(args) == 1 {
		a, err := cl.Array(ctx, args[0])
		if err != nil {
			return err
		}
		only = a.ID
	}
	mine := o.scope.list(o.user) // mine.go
	if only != "" {
		mine = "" // an array's tasks are listed whoever owns them
	}
	out := queueOutput{QueueResponse: api.QueueResponse{QueuedJobs: []api.QueuedJob{}}, RunningJobs: []api.Job{}}
	if slices.Contains(states, api.StateQueued) {
		if out.QueueResponse, err = cl.QueueOf(ctx, client.QueueFilter{User: o.user, Mine: mine, Limit: o.limit, All: o.all || only != ""}); err != nil {
			return err
		}
	}
	for _, st := range states {
		if st == api.StateQueued || only != "" {
			continue
		}
		l, err := cl.JobsAll(ctx, client.JobFilter{State: st, User: o.user, Mine: mine})
		if err != nil {
			return err
		}
		for _, j := range l.Jobs {
			if j.State == st { // an older server may ignore a filter
				out.RunningJobs = append(out.RunningJobs, j)
			}
		}
	}
	view := out.QueueResponse
	view.QueuedJobs = collapseQueue(out.QueuedJobs, o.expand, only) // arrays.go
	started := collapseStarted(out.RunningJobs, view.QueuedJobs, o.expand)
	return c.emit(out, func(w io.Writer) error {
		if len(started) > 0 {
			if err := c.printStarted(w, started); err != nil {
				return err
			}
			if !slices.Contains(states, api.StateQueued) {
				return nil
			}
			fmt.Fprintln(w)
		}
		if !slices.Contains(states, api.StateQueued) {
			_, err := fmt.Fprintln(w, "no jobs running")
			return err
		}
		if err := c.printQueue(w, view, o.long); err != nil {
			return err
		}
		return queueFooter(w, out.QueueResponse)
	})
}

// collapseStarted is collapseQueue for corral queue's started jobs: an
// array whose row is in the queue (with its counts, running tasks too)
// has no rows here; another array's started tasks are one row, with the
// array's id and how many run.
func collapseStarted(jobs []api.Job, queued []api.QueuedJob, expand bool) []api.Job {
	if expand {
		return jobs
	}
	inQueue := map[string]bool{}
	for _, q := range queued {
		if isArrayRow(q.ArrayJobID, q.ArrayTaskID) {
			inQueue[q.ArrayJobID] = true
		}
	}
	out := make([]api.Job, 0, len(jobs))
	at := map[string]int{} // array id -> its row in out
	for _, j := range jobs {
		switch {
		case j.ArrayJobID == "":
			out = append(out, j)
		case inQueue[j.ArrayJobID]:
		default:
			if i, ok := at[j.ArrayJobID]; ok {
				out[i].GPUCount += j.GPUCount
				out[i].GrantedGPUs += j.GrantedGPUs
				out[i].Allocation = append(out[i].Allocation, j.Allocation...)
				continue
			}
			at[j.ArrayJobID] = len(out)
			j.ID, j.ArrayTaskID = j.ArrayJobID, nil
			j.Allocation = slices.Clone(j.Allocation)
			out = append(out, j)
		}
	}
	return out
}

// printStarted is corral queue's table of started jobs.
func (c *cli) printStarted(w io.Writer, jobs []api.Job) error {
	now := c.now()
	t := newTable(w, "NUM", "ID", "USER", "STATE", "GPUS", "NODES", "RUNTIME", "NAME")
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	short := shortIDs(ids, shortIDMin)
	for i, j := range jobs {
		if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
			short[i] = j.ID // an array's row shows its whole id (arrays.go)
		}
		task := j.ArrayTaskID
		if isArrayRow(j.ArrayJobID, j.ArrayTaskID) {
			task = nil // the array's row: its number alone
		}
		t.row(numCell(j.Number, task), short[i], j.User, jobState(j), fmtJobGPUs(j), jobNodes(j), jobRuntime(j, now), clip(j.Name, 32))
	}
	return t.flush()
}

// jobNodes names the nodes a job runs on.
func jobNodes(j api.Job) string {
	var nodes []string
	for _, a := range j.Allocation {
		if !slices.Contains(nodes, a.NodeID) {
			nodes = append(nodes, a.NodeID)
		}
	}
	if len(nodes) == 0 && j.NodeID != "" {
		nodes = append(nodes, j.NodeID) // a job of no GPUs: placed on a node all the same
	}
	if len(nodes) == 0 {
		return "-"
	}
	return clip(strings.Join(nodes, ","), 40)
}

// mayCancel is a filter of jobs the caller may act on, from GET
// /auth/whoami (one call): admins, any; users, their own and their
// administered projects'; viewers, none. It mirrors the server's check, so
// that corral cancel -A does not try, and fail on, jobs it may not touch.
func mayCancel(ctx context.Context, cl *client.Client) (func(api.Job) bool, error) {
	me, err := cl.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	return func(j api.Job) bool {
		switch me.Role {
		case api.RoleAdmin:
			return true
		case api.RoleUser:
			return j.User == me.User || (j.Project != "" && slices.Contains(me.ProjectAdmin, j.Project))
		}
		return false
	}, nil
}

// mineValue is mine=true for a filter of the caller's own jobs.
func mineValue(mine bool) string {
	if mine {
		return "true"
	}
	return ""
}
