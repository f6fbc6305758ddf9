package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/bench"
	"github.com/corral-sched/corral/internal/daemon"
)

// command is one of corral's top-level commands: its name (the first word
// of its Use) and how to build it.
type command struct {
	name string
	make func(c *cli) *cobra.Command
}

// commands is every top-level command, in the order help lists them. Every
// command is registered here, in one list.
//
// The commands check their command lines one way:
//
//   - Positional arguments are checked by the command's Args, never in its
//     RunE, with a validator whose usage error names what is missing or too
//     many: argsExactly(n, what) for a fixed number (none included),
//     argsAtMost and argsAtLeast for optional arguments and lists,
//     needCommand for a command line to run after --, and argsSubcommand
//     for a command that runs on its own and has subcommands. A command
//     that only groups subcommands has no Args: cobra shows its help.
//     cobra's own validators are not used (their messages name no
//     argument); cobra.ArbitraryArgs is, where any words are welcome.
//   - Flag values and combinations of flags and arguments are checked at the
//     start of RunE, before any client, with usagef.
//
// Both end as exit code 2 with a hint to run --help (see fail). A command
// whose run is one call and its answer printed uses callAndPrint (call.go).
var commands = [...]command{
	// Daemons and the store's offline tools (internal/daemon).
	{"up", func(*cli) *cobra.Command { return daemon.NewUpCmd() }},
	{"server", func(*cli) *cobra.Command { return daemon.NewServerCmd() }},
	{"store", func(*cli) *cobra.Command { return daemon.NewStoreCmd() }},
	{"agent", func(*cli) *cobra.Command { return daemon.NewAgentCmd() }},
	{"shim", func(*cli) *cobra.Command { return daemon.NewShimCmd() }},

	// Jobs (submit.go, jobs.go, show.go, cancel.go).
	{"submit", (*cli).newSubmitCmd},
	{"queue", (*cli).newQueueCmd},
	{"jobs", (*cli).newJobsCmd},
	{"show", (*cli).newShowCmd},
	{"cancel", (*cli).newCancelCmd},
	{"logs", (*cli).newLogsCmd},
	{"priority", (*cli).newPriorityCmd},
	{"depend", (*cli).newDependCmd},
	{"wait", (*cli).newWaitCmd}, // wait.go, with run
	{"run", (*cli).newRunCmd},
	{"array", (*cli).newArrayCmd}, // arrays.go
	{"shell", (*cli).newShellCmd}, // shell.go, with alloc
	{"alloc", (*cli).newAllocCmd},
	{"notebook", (*cli).newNotebookCmd},
	{"export", (*cli).newExportCmd}, // export.go

	// Cluster and scheduling (cluster.go).
	{"nodes", (*cli).newNodesCmd},
	{"policy", (*cli).newPolicyCmd},
	{"quota", (*cli).newQuotaCmd},
	{"weight", (*cli).newWeightCmd},
	{"orchestrator", (*cli).newOrchestratorCmd},
	{"hold", (*cli).newHoldCmd}, // holdcmd.go
	{"release", (*cli).newReleaseCmd},
	{"advise", (*cli).newAdviseCmd},   // advise.go
	{"reserve", (*cli).newReserveCmd}, // reserve.go: bookings

	// Usage, prices and budgets (usagecmd.go).
	{"usage", (*cli).newUsageCmd},
	{"price", (*cli).newPriceCmd},
	{"budget", (*cli).newBudgetCmd},

	// Access: tokens, who am I, the audit trail (tokencmd.go).
	{"token", (*cli).newTokenCmd},
	{"whoami", (*cli).newWhoamiCmd},
	{"login", (*cli).newLoginCmd},     // login.go: signing in
	{"logout", (*cli).newLogoutCmd},   // login.go
	{"user", (*cli).newUserCmd},       // login.go: invites
	{"version", (*cli).newVersionCmd}, // version.go
	{"audit", (*cli).newAuditCmd},

	// Notifications: endpoints and the delivery log (notifycmd.go).
	{"notify", (*cli).newNotifyCmd},

	// Trace replay (sim.go) and load tools (internal/bench).
	{"sim", (*cli).newSimCmd},
	{"bench", func(c *cli) *cobra.Command { return bench.NewCmd(c.benchCLI()) }},
}

// benchCLI is what the bench tools take from this command line.
func (c *cli) benchCLI() bench.CLI {
	return bench.CLI{Stdout: c.stdout, Stderr: c.stderr, Client: c.client, Emit: c.emit, Describe: describe}
}

// subcommands builds the top-level commands that running args needs. A
// command line that names one of them by its name gets that command alone:
// building all forty-odd commands, with their flags, was a sixth of a
// `corral submit`'s page faults at start-up (docs/benchmarks.md, "CLI
// start-up"). Anything else (help, completion, an alias, a typo that
// deserves a suggestion, no command at all) gets them all, so cobra sees
// the whole tree.
func (c *cli) subcommands(args []string) []*cobra.Command {
	if name, ok := commandName(args); ok {
		for _, cmd := range commands {
			if cmd.name == name {
				return []*cobra.Command{cmd.make(c)}
			}
		}
	}
	all := make([]*cobra.Command, len(commands))
	for i, cmd := range commands {
		all[i] = cmd.make(c)
	}
	return all
}

// commandName returns the first argument that is not a root flag, which
// cobra takes as the command's name; ok is false when there is none or
// the root flags cannot be told apart from it for certain.
func commandName(args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return "", false
		case !strings.HasPrefix(a, "-") || a == "-":
			return a, true
		case strings.Contains(a, "="):
			// --server=URL, -o=json: the value is in the same word.
		case a == "--server" || a == "--token" || a == "--output" || a == "-o":
			i++ // the next word is the value
		case strings.HasPrefix(a, "-o"):
			// -ojson
		default:
			return "", false // a flag of no known shape: let cobra see it all
		}
	}
	return "", false
}
