package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
)

// Shell completion of job ids: the commands that take a job
// offer the caller's unfinished jobs by number, with their names and
// states as descriptions, from one call (GET /complete/jobs). It is
// quick and silent: on any error (no server, no token) it offers nothing,
// and files are never offered in their place.

// completeTimeout bounds the call a completion makes: a shell waits on it.
const completeTimeout = 2 * time.Second

// what a command's argument may be.
type refKind int

const (
	refJobs   refKind = iota // jobs and arrays (an array's number names it whole)
	refPlain                 // jobs only: not arrays
	refArrays                // arrays only
)

// jobArg says which of a command's arguments is a job: at pos (-1: every
// one, as for cancel), of kind; then, optionally, what the next argument
// completes to.
type jobArg struct {
	path string // the command, as "cancel" or "array show"
	pos  int
	kind refKind
	next []string // the argument after the job's: fixed words
}

// jobArgs are the commands whose arguments complete to job ids.
var jobArgs = []jobArg{
	{path: "cancel", pos: -1, kind: refJobs},
	{path: "wait", pos: -1, kind: refJobs},
	{path: "show", pos: 0, kind: refJobs},
	{path: "logs", pos: 0, kind: refPlain},
	{path: "priority", pos: 0, kind: refPlain, next: []string{"low", "normal", "high", "critical"}},
	{path: "shell", pos: 0, kind: refPlain},
	{path: "depend", pos: 0, kind: refPlain},
	{path: "queue", pos: 0, kind: refArrays},
	{path: "array show", pos: 0, kind: refArrays},
	{path: "array throttle", pos: 0, kind: refArrays},
}

// addCompletions gives the commands of jobArgs under root (those built)
// their completion of job ids.
func (c *cli) addCompletions(root *cobra.Command) {
	for _, a := range jobArgs {
		cmd := root
		for _, name := range strings.Fields(a.path) {
			i := slices.IndexFunc(cmd.Commands(), func(s *cobra.Command) bool { return s.Name() == name })
			if i < 0 {
				cmd = nil
				break
			}
			cmd = cmd.Commands()[i]
		}
		if cmd != nil && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = c.completeJobArg(a)
		}
	}
}

// completeJobArg completes a's argument: the caller's unfinished jobs
// (or arrays) whose numbers start with what is typed, newest first, less
// those already given.
func (c *cli) completeJobArg(a jobArg) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		const none = cobra.ShellCompDirectiveNoFileComp
		switch {
		case a.pos >= 0 && len(args) == a.pos+1 && a.next != nil:
			return prefixed(a.next, toComplete), none
		case a.pos >= 0 && len(args) != a.pos:
			return nil, none
		}
		cl, err := c.client()
		if err != nil {
			return nil, none
		}
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		list, err := cl.ActiveJobs(ctx)
		if err != nil {
			return nil, none
		}
		return jobCompletions(list.Jobs, a.kind, args, toComplete), none
	}
}

// prefixed is the words that start with typed.
func prefixed(words []string, typed string) []cobra.Completion {
	out := []cobra.Completion{}
	for _, w := range words {
		if strings.HasPrefix(w, typed) {
			out = append(out, w)
		}
	}
	return out
}

// jobCompletions are the refs of kind whose numbers start with typed, not
// in given, as "NUMBER\tname (state)"; a job without a number offers its
// id.
func jobCompletions(refs []api.JobRef, kind refKind, given []string, typed string) []cobra.Completion {
	out := []cobra.Completion{}
	for _, r := range refs {
		if (kind == refPlain && r.Array) || (kind == refArrays && !r.Array) {
			continue
		}
		word := r.ID
		if r.Number > 0 {
			word = strconv.FormatInt(r.Number, 10)
		}
		if !strings.HasPrefix(word, typed) || slices.Contains(given, word) || slices.Contains(given, r.ID) {
			continue
		}
		state := string(r.State)
		if r.Array {
			state = "array, " + state
		}
		desc := "(" + state + ")"
		if r.Name != "" {
			desc = r.Name + " " + desc
		}
		out = append(out, cobra.CompletionWithDesc(word, desc))
	}
	return out
}
