package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
)

func (c *cli) newShowCmd() *cobra.Command {
	var values bool
	var whatIf int
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one job: its request, allocation and events",
		Long: `Show one job: its request, allocation and events. Its environment is
listed by name (a job submitted with --export ALL carries the whole shell's);
--env (-v) prints the values too, for those who may act on the job (others
see (hidden)). -o json prints the API's answer, values included.

--what-if-gpus N answers when the queued job would start with N GPUs per
node instead of its own count, planned on the scheduler's current queue;
nothing is submitted or changed (GET /jobs/ID/what-if?gpus=N).`,
		Example: `  corral show 1234
  corral show 1234 --what-if-gpus 4   # would it start sooner on 4 GPUs?`,
		Args: argsExactly(1, "the job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("what-if-gpus") {
				w, err := cl.WhatIf(cmd.Context(), args[0], whatIf)
				if err != nil {
					return err
				}
				return c.emit(w, func(out io.Writer) error { return printWhatIf(out, w, c.now()) })
			}
			job, err := cl.Job(cmd.Context(), args[0])
			if isArrayError(err) { // an array's id shows the array (arrays.go)
				a, err := cl.Array(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return c.emit(a, func(w io.Writer) error { return printArray(w, a, c.now()) })
			}
			if err != nil {
				return err
			}
			return c.emit(job, func(w io.Writer) error { return c.printJob(w, job, values) })
		},
	}
	cmd.Flags().BoolVarP(&values, "env", "v", false, "print the values of the job's environment, not only its names")
	cmd.Flags().IntVar(&whatIf, "what-if-gpus", 0, "say when the queued job would start with this many GPUs per node (nothing changes)")
	return cmd
}

// printJob writes a job as "Key: value" lines, then its allocation and its
// events; its environment by name, with values when values is set.
func (c *cli) printJob(w io.Writer, j api.Job, values bool) error {
	now := c.now()
	t := newTable(w)
	kv := func(k, v string) { t.row(k+":", v) }
	kv("Number", numCell(j.Number, j.ArrayTaskID)) // numbers.go
	kv("ID", j.ID)
	kv("Name", j.Name)
	kv("State", jobState(j))
	switch {
	case j.Reason != "" && j.Message != "":
		kv("Reason", j.Reason+": "+j.Message)
	case j.Reason != "" || j.Message != "":
		kv("Reason", j.Reason+j.Message)
	}
	kv("User", j.User)
	kv("Project", j.Project)
	if j.ScriptName != "" || j.Script != "" {
		kv("Script", fmtScript(j)) // script.go
		kv("Arguments", j.Command)
	} else {
		kv("Command", j.Command)
	}
	kv("Workdir", j.Workdir)
	if j.Output != "" {
		kv("Output file", j.Output)
	}
	if j.Error != "" {
		kv("Error file", j.Error)
	}
	showImage(kv, j) // imageflags.go
	if len(j.Env) > 0 && values {
		kv("Env", fmtEnv(j.Env))
	} else if len(j.Env) > 0 {
		kv("Env", fmtEnvNames(j.Env))
	}
	kv("GPUs", fmtRequest(j))
	if e := fmtElastic(j); e != "" {
		kv("Elastic", e)
	}
	if p := fmtPart(j.GPUPart); p != "" {
		kv("GPU part", p) // gpushare.go
	}
	if j.GrantedGPUs > 0 {
		kv("Granted GPUs", strconv.Itoa(j.GrantedGPUs))
	}
	if j.GPUEquivalents > 0 && j.Partial() {
		kv("GPU-equivalents", strconv.FormatFloat(j.GPUEquivalents, 'g', 4, 64))
	}
	kv("Priority", j.Priority.String())
	if j.DependsOn != "" {
		kv("Depends on", j.DependsOn)
	}
	if j.Reservation != "" {
		kv("Reservation", j.Reservation) // docs/bookings-scheduling.md
	}
	kv("Time limit", fmtLimit(j.TimeLimit, j.TimeLimitFrom, "none")) // script.go
	kv("Estimate", fmtLimit(j.EstimatedDuration, j.EstimateFrom, "none given (the scheduler's own)"))
	if j.EstimateBasis != "" {
		kv("Estimate basis", j.EstimateBasis) // learned run times (docs/scheduling.md)
	}
	if j.Signal != "" {
		kv("Signal", j.Signal+" (seconds before the time limit)")
	}
	if j.Begin != nil {
		kv("Begin", fmtTimeFull(*j.Begin, now))
	}
	kv("Retries", fmt.Sprintf("%d (max %d)", j.RetryCount, j.MaxRetries))
	if j.State == api.StateQueued {
		if j.QueuePosition > 0 { // none while it waits for its dependencies
			kv("Queue position", strconv.Itoa(j.QueuePosition))
		}
		est := fmtIn(nil, j.EstimatedStartTime, now)
		if r := fmtStartRange(j.EstimatedStartLow, j.EstimatedStartHigh, now); r != "" {
			est += " (" + r + ")"
		}
		kv("Est. start", est)
		reason := j.PendingCause // the precise one, where pending_reason says reservation
		if reason == "" {
			reason = j.PendingReason
		}
		pending := j.PendingMessage
		if pending == "" {
			pending = reason
		}
		if reason != "" && j.PendingMessage != "" {
			pending = reason + ": " + j.PendingMessage
		}
		kv("Pending", pending)
		if j.NotBefore != nil {
			kv("Not before", fmtTimeFull(*j.NotBefore, now))
		}
	}
	if j.Pool != "" {
		kv("Pool", j.Pool)
	}
	if len(j.NodeLabels) > 0 {
		kv("Node labels", fmtEnv(j.NodeLabels))
	}
	if j.Borrowed {
		kv("Borrowed", "yes: on idle GPUs beyond its quota, the first taken back")
	}
	if j.Preempting {
		kv("Preempting", j.PreemptMessage)
	}
	if j.Preemptions > 0 {
		kv("Preemptions", strconv.Itoa(j.Preemptions))
	}
	if j.MemMiB > 0 {
		kv("Memory limit", fmtMiB(j.MemMiB))
	}
	if j.CPUs > 0 {
		kv("CPU limit", strconv.FormatFloat(j.CPUs, 'f', -1, 64))
	}
	if j.PreemptGrace != nil {
		kv("Preempt grace", fmtDuration(j.PreemptGrace.Duration()))
	}
	if j.Notify != "" || j.NotifyTasks {
		kv("Notify", notifyText(j)) // notifycmd.go
	}
	showInteractive(j, kv, now) // policyclass.go
	if j.Idle && j.IdleSince != nil {
		kv("Idle", "since "+fmtTimeFull(*j.IdleSince, now))
	}
	if j.GPUSeconds > 0 {
		kv("GPU time", fmt.Sprintf("%.2f GPU-hours", j.GPUSeconds/3600))
	}
	kv("Submitted", fmtTimeFull(j.SubmittedAt, now))
	if j.StartedAt != nil {
		kv("Started", fmtTimeFull(*j.StartedAt, now))
	}
	if j.FinishedAt != nil {
		kv("Finished", fmtTimeFull(*j.FinishedAt, now))
	}
	if j.StartedAt != nil {
		kv("Runtime", jobRuntime(j, now))
	}
	if j.ExitCode != nil {
		kv("Exit code", exitCode(j))
	}
	if err := t.flush(); err != nil {
		return err
	}

	if len(j.Allocation) > 0 {
		fmt.Fprintln(w, "Allocation:")
		t = newTable(w, "  NODE", "GPU", "UUID", "MEMORY")
		for _, a := range j.Allocation {
			mem := "-"
			if a.MemoryGB > 0 {
				mem = fmtGB(a.MemoryGB)
			}
			uuid := a.GPUUUID
			if a.Simulated {
				uuid += " (simulated)"
			}
			switch { // a part of the GPU (gpushare.go)
			case a.MIG != nil:
				uuid += fmt.Sprintf(", MIG %s %s", a.MIG.Profile, a.MIG.UUID)
			case a.ShareMiB > 0:
				uuid += ", MPS share"
			}
			t.row("  "+a.NodeID, strconv.Itoa(a.GPUID), uuid, mem)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	if len(j.Events) > 0 {
		fmt.Fprintln(w, "Events:")
		t = newTable(w, "  TIME", "TRANSITION", "REASON", "MESSAGE")
		for _, e := range j.Events {
			from := string(e.From)
			if from == "" {
				from = "*"
			}
			t.row("  "+e.At.Local().Format("2006-01-02 15:04:05"), from+" -> "+string(e.To), e.Reason, e.Message)
		}
		return t.flush()
	}
	return nil
}

// fmtRequest writes a job's GPU request in words.
func fmtRequest(j api.Job) string {
	s := strconv.Itoa(j.GPUCount)
	if j.Nodes > 1 {
		s = fmt.Sprintf("%d per node on %d nodes (%d in all)", j.GPUCount, j.Nodes, j.GPUCount*j.Nodes)
	}
	if j.GPUType != "" {
		s += ", type " + j.GPUType
	}
	if j.GPUMemoryGB > 0 {
		s += ", at least " + fmtGB(j.GPUMemoryGB) + " free each"
	}
	return s
}

// fmtEnv writes an environment as sorted K=V words.
func fmtEnv(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + shellQuote(env[k])
	}
	return strings.Join(parts, " ")
}

// fmtEnvNames writes an environment's size and its sorted names, without
// the values (corral show --env prints them).
func fmtEnvNames(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	word := "variables"
	if len(keys) == 1 {
		word = "variable"
	}
	return fmt.Sprintf("%d %s (values: --env): %s", len(keys), word, strings.Join(keys, " "))
}

// jobState is the state, noting a pending cancel.
func jobState(j api.Job) string {
	switch {
	case j.CancelRequested && !j.State.Terminal():
		return string(j.State) + " (canceling)"
	case j.Preempting && !j.State.Terminal():
		return string(j.State) + " (preempting)"
	case j.Idle && j.State == api.StateRunning:
		return string(j.State) + " (idle)"
	}
	return string(j.State)
}

// jobRuntime is how long the job has run, or ran.
func jobRuntime(j api.Job, now time.Time) string {
	switch {
	case j.StartedAt == nil:
		return "-"
	case j.FinishedAt != nil:
		return fmtDuration(j.FinishedAt.Sub(*j.StartedAt))
	case j.State.Terminal():
		return "-"
	}
	return fmtDuration(now.Sub(*j.StartedAt))
}

func exitCode(j api.Job) string {
	if j.ExitCode == nil {
		return "-"
	}
	return strconv.Itoa(*j.ExitCode)
}

// printWhatIf writes a what-if answer: when the job would start with the
// GPUs asked about, its range, and why it would wait.
func printWhatIf(w io.Writer, a api.WhatIf, now time.Time) error {
	start := "unknown"
	switch {
	case a.StartsNow:
		start = "now"
	case a.EstimatedStartTime != nil:
		start = fmtIn(nil, a.EstimatedStartTime, now)
		if r := fmtStartRange(a.EstimatedStartLow, a.EstimatedStartHigh, now); r != "" {
			start += " (" + r + ")"
		}
	}
	t := newTable(w)
	kv := func(k, v string) { t.row(k+":", v) }
	kv("Job", a.JobID)
	kv("With", fmt.Sprintf("%d GPUs per node (asks for %d), %d node(s)", a.GPUs, a.CurrentGPUs, a.Nodes))
	kv("Would start", start)
	if a.EstimateBasis != "" {
		kv("Estimate basis", a.EstimateBasis)
	}
	if !a.StartsNow && (a.PendingReason != "" || a.PendingMessage != "") {
		kv("Would wait", strings.Trim(a.PendingReason+": "+a.PendingMessage, ": "))
	}
	return t.flush()
}
