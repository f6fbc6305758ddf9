package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

func (c *cli) newNodesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Show the nodes and their GPUs; cordon, drain or uncordon a node",
		Long: `corral nodes lists every node and GPU: model, memory, live utilization and
temperature, and who holds it (a job, a hold, or a foreign process that Corral
did not start, with its pid and user).

  corral nodes cordon NODE     nothing new starts there; running jobs go on
  corral nodes drain NODE      the same, and the node reads "drained" once its jobs end
  corral nodes uncordon NODE   the node takes new jobs again`,
		Args: argsSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.ClusterStatus, error) {
				return cl.Cluster(ctx)
			}, printNodes)
		},
	}
	for _, a := range []struct{ name, short string }{
		{"cordon", "Start nothing new on a node; its running jobs go on"},
		{"drain", "Start nothing new on a node and let its running jobs finish"},
		{"uncordon", "Let a cordoned or drained node take new jobs again"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   a.name + " NODE",
			Short: a.short,
			Args:  argsExactly(1, "one node id"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.NodeAction, error) {
					return cl.NodeAction(ctx, args[0], a.name)
				}, func(w io.Writer, r api.NodeAction) error {
					_, err := fmt.Fprintf(w, "node %s is %s\n", r.NodeID, r.State)
					return err
				})
			},
		})
	}
	return cmd
}

// printNodes writes one row per GPU, then the totals.
func printNodes(w io.Writer, s api.ClusterStatus) error {
	if len(s.Nodes) == 0 {
		_, err := fmt.Fprintln(w, `no nodes: start one with "corral up" or "corral agent"`)
		return err
	}
	t := newTable(w, "NODE", "HOSTNAME", "STATE", "CONTAINMENT", "GPU", "MODEL", "MEM", "USED", "UTIL", "TEMP", "ALLOCATED_TO")
	simulated := false
	for _, n := range s.Nodes {
		if len(n.GPUs) == 0 {
			t.row(n.NodeID, n.Hostname, n.State, n.Containment, "-", n.GPUType, "-", "-", "-", "-", "-")
			continue
		}
		for _, g := range n.GPUs {
			model := g.Model
			if model == "" {
				model = n.GPUType
			}
			if g.Simulated || n.Simulated {
				model += " (sim)"
				simulated = true
			}
			model += migNote(g.MIG)
			if g.Shared {
				model += " (MPS shared)"
			}
			temp := "-"
			if g.Temperature != nil {
				temp = strconv.Itoa(*g.Temperature) + "C"
			}
			to := ""
			if g.AllocatedTo != nil {
				to = *g.AllocatedTo
				if g.AllocatedNumber != "" {
					to = g.AllocatedNumber + " " + to // numbers.go: the job's number first
				}
			}
			if g.Held && to != "" {
				to = "hold:" + to
			}
			if to == "" && len(g.Foreign) > 0 {
				to = "foreign:" + foreignList(g.Foreign)
			}
			t.row(n.NodeID, n.Hostname, n.State, n.Containment, strconv.Itoa(g.ID), model, fmtMiB(g.MemoryTotal),
				fmtMiB(g.MemoryUsed), strconv.Itoa(g.Utilization)+"%", temp, to)
			if g.MIG != nil && g.MIG.Mode == api.MIGEnabled {
				for _, m := range g.MIG.Devices {
					t.row(n.NodeID, "", "", "", fmt.Sprintf("%d/%d", g.ID, m.Index), "MIG "+m.Profile+" "+m.UUID,
						fmtMiB(m.MemoryTotal), "-", "-", "-", holderText(m.AllocatedNumber, m.AllocatedTo))
				}
			}
			for _, sh := range g.Shares { // MPS shares: one row each, under their GPU
				what := "MPS share of " + sh.User
				if sh.Compute > 0 {
					what += fmt.Sprintf(", %d%% compute", sh.Compute)
				}
				t.row(n.NodeID, "", "", "", fmt.Sprintf("%d/share", g.ID), what, fmtMiB(sh.MemoryMiB), "-", "-", "-", holderText(sh.Number, sh.JobID))
			}
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	nodes := "nodes"
	if len(s.Nodes) == 1 {
		nodes = "node"
	}
	total := fmt.Sprintf("%d GPUs on %d %s: %d available, %d allocated", s.TotalGPUs, len(s.Nodes), nodes, s.AvailableGPUs, s.AllocatedGPUs)
	if s.HeldGPUs > 0 {
		total += fmt.Sprintf(" (%d held outside Corral)", s.HeldGPUs)
	}
	if s.ForeignGPUs > 0 {
		total += fmt.Sprintf("; %d busy with processes Corral did not start", s.ForeignGPUs)
	}
	if simulated {
		total += "; (sim) marks simulated GPUs, not real devices"
	}
	if _, err := fmt.Fprintln(w, total); err != nil {
		return err
	}
	return printDiskFull(w, s)
}

// holderText is who holds a slice or share: the job's number, then its id.
func holderText(number, id string) string {
	if number != "" && id != "" {
		return number + " " + id
	}
	return id
}

// migNote tells a GPU's MIG mode beside its model where MIG is on or about
// to change; "" for a GPU without MIG or with it off.
func migNote(m *api.MIG) string {
	switch {
	case m == nil:
		return ""
	case m.Mode == api.MIGEnabled && m.PendingMode == api.MIGDisabled:
		return fmt.Sprintf(" (MIG: %d devices; off at next reset)", len(m.Devices))
	case m.Mode == api.MIGEnabled:
		return fmt.Sprintf(" (MIG: %d devices)", len(m.Devices))
	case m.PendingMode == api.MIGEnabled:
		return " (MIG on at next reset)"
	}
	return ""
}

func (c *cli) newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy [get|set]",
		Short: "Show or change the scheduling policy",
		Long: `Show or change the scheduling policy: fair_share (the default), priority,
fcfs or sjf, with the backfill and preemption switches. Gang placement is
always on for multi-GPU jobs. Changes take effect at the next cycle.`,
		Args: argsSubcommand,
		RunE: c.policyGet,
	}
	get := &cobra.Command{
		Use:   "get",
		Short: "Show the scheduling policy",
		Args:  argsExactly(0, "no arguments"),
		RunE:  c.policyGet,
	}
	var f policyFlags
	set := &cobra.Command{
		Use:   "set [POLICY] [flags]",
		Short: "Change the scheduling policy, its switches or its knobs",
		Example: `  corral policy set fcfs
  corral policy set priority --preemption --min-run-time 15m
  corral policy set --backfill=false --aging 1h --half-life 3d`,
		Args: argsAtMost(1, "one policy name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := f.update(cmd, args)
			if err != nil {
				return err
			}
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Policies, error) {
				return cl.SetPolicies(ctx, u)
			}, printPolicies)
		},
	}
	f.register(set)
	cmd.AddCommand(get, set)
	return cmd
}

func (c *cli) policyGet(cmd *cobra.Command, _ []string) error {
	return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.Policies, error) {
		return cl.Policies(ctx)
	}, printPolicies)
}

func (c *cli) newOrchestratorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orchestrator [status|start|stop]",
		Short: "Show, start or stop the scheduling loop",
		Long: `Show, start or stop the scheduling loop. Stopped means nothing new starts;
running jobs are not touched.`,
		Args: argsSubcommand,
	}
	type action struct {
		use, short string
		call       func(*client.Client, context.Context) (api.OrchestratorStatus, error)
	}
	actions := []action{
		{"status", "Show the scheduling loop's state", (*client.Client).OrchestratorStatus},
		{"start", "Start scheduling", (*client.Client).StartOrchestrator},
		{"stop", "Stop scheduling new jobs (running jobs go on)", (*client.Client).StopOrchestrator},
	}
	for _, a := range actions {
		run := func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(c, cmd.Context(), func(ctx context.Context, cl *client.Client) (api.OrchestratorStatus, error) {
				return a.call(cl, ctx)
			}, c.printOrchestrator)
		}
		if a.use == "status" {
			cmd.RunE = run // plain "corral orchestrator" shows the status
		}
		cmd.AddCommand(&cobra.Command{Use: a.use, Short: a.short, Args: argsExactly(0, "no arguments"), RunE: run})
	}
	return cmd
}

func (c *cli) printOrchestrator(w io.Writer, s api.OrchestratorStatus) error {
	now := c.now()
	state := "stopped (nothing new starts; running jobs go on)"
	if s.Running {
		state = "running"
	}
	t := newTable(w)
	t.row("state:", state)
	t.row("policy:", s.Policy)
	last := "never"
	if s.LastCycleAt != nil {
		last = fmt.Sprintf("%s ago, took %.1f ms", fmtDuration(now.Sub(*s.LastCycleAt)), s.LastCycleMS)
	}
	t.row("cycles:", fmt.Sprintf("%d (last %s)", s.Cycles, last))
	t.row("queued jobs:", strconv.Itoa(s.QueuedJobs))
	t.row("running jobs:", strconv.Itoa(s.RunningJobs))
	t.row("server started:", fmtTimeFull(s.StartedAt, now))
	t.row("version:", s.Version)
	return t.flush()
}

// foreignList names foreign processes as pid(user), comma-separated.
func foreignList(ps []api.ForeignProcess) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(p.PID)
		if p.User != "" {
			parts[i] += "(" + p.User + ")"
		}
	}
	return strings.Join(parts, ",")
}

// printDiskFull adds to `corral nodes` a line for each node that takes no
// new jobs because its log disk is full (api.Node.DiskFull).
func printDiskFull(w io.Writer, s api.ClusterStatus) error {
	for _, n := range s.Nodes {
		if n.DiskFull != "" {
			if _, err := fmt.Fprintf(w, "node %s takes no new jobs: %s\n", n.NodeID, n.DiskFull); err != nil {
				return err
			}
		}
	}
	return nil
}
