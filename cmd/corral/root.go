package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
	"github.com/corral-sched/corral/internal/cmdkit"
)

// Exit codes of the corral command.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed (server error, unreachable, ...)
	exitUsage = 2 // the command line was wrong
)

// Output formats of -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// run is the whole program: it runs the command line args and returns the
// exit code.
func run(args []string) int {
	return runWith(args, os.Stdout, os.Stderr)
}

// runWith is run writing to stdout and stderr, so that tests can capture
// what it prints.
func runWith(args []string, stdout, stderr io.Writer) int {
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	c := &cli{stdout: stdout, stderr: stderr, now: time.Now}
	root := c.newRootCmd(args)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(context.Background())
	if err == nil {
		return exitOK
	}
	return c.fail(cmd, err)
}

// cli holds one invocation's global flags and outputs; commands are methods
// so that they share it without package-level state.
type cli struct {
	stdout, stderr io.Writer
	now            func() time.Time

	server string // --server; empty: $CORRAL_SERVER, else client.DefaultServer
	token  string // --token; empty: $CORRAL_TOKEN
	output string // -o/--output

	// started is set once a command's RunE begins: errors before that came
	// from parsing the command line, so they are usage errors.
	started bool
}

// newRootCmd builds the command tree for the command line args: the root
// and, when args name one of its commands, that command alone (see
// subcommands).
func (c *cli) newRootCmd(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "corral",
		Short: "Corral: a GPU job scheduler",
		Long: `Corral queues GPU jobs, places them on whole GPUs by policy, runs them and
shows the cluster live.

Start a single-machine setup with "corral up", then submit work with
"corral submit --gpus 1 -- python train.py". Client commands talk to
$CORRAL_SERVER (else the default server "corral login" saved, else
` + client.DefaultServer + `) with $CORRAL_TOKEN; --server and --token override
them. Without a token, the CLI uses the one "corral login" (or "corral up")
saved for that server in the client config file ($CORRAL_CONFIG, else
~/.config/corral/config.json).

Wherever a command takes a job ID, give the job's number (1234, the first
column of corral queue and corral jobs), an array task's (1234_7), the
job's name when it names one of your jobs, or its id (or a unique prefix of
6 or more characters).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVar(&c.server, "server", "", "Corral server URL or host:port (default $CORRAL_SERVER, else "+client.DefaultServer+")")
	pf.StringVar(&c.token, "token", "", "API token sent as a bearer token (default $CORRAL_TOKEN)")
	pf.StringVarP(&c.output, "output", "o", outputTable, "output format: table or json (json prints the API's answer)")

	var showVersion bool
	root.Flags().BoolVar(&showVersion, "version", false, "print the version of this corral and of its server (corral version)")
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if showVersion {
			return c.printVersion(cmd.Context(), false)
		}
		if len(args) > 0 {
			return usagef("unknown command %q for \"corral\"", args[0])
		}
		return cmd.Help()
	}

	root.AddCommand(c.subcommands(args)...)
	c.addCompletions(root) // complete.go: job ids
	c.markStarts(root)
	return root
}

// markStarts wraps every command's run function so that c.started is set
// when it begins; see fail.
func (c *cli) markStarts(cmd *cobra.Command) {
	if r := cmd.RunE; r != nil {
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			c.started = true
			return r(cmd, args)
		}
	}
	if r := cmd.Run; r != nil {
		cmd.Run = func(cmd *cobra.Command, args []string) {
			c.started = true
			r(cmd, args)
		}
	}
	for _, sub := range cmd.Commands() {
		c.markStarts(sub)
	}
}

// usageError marks an error in the command line: exit code 2 and a hint.
// cmdkit.UsageError is the same mark for the commands built outside this
// package (the daemons, the bench tools); fail reads both.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error with a formatted message.
func usagef(format string, args ...any) error {
	return cmdkit.Usagef(format, args...)
}

// fail prints err as "corral: <message>" and returns the exit code.
func (c *cli) fail(cmd *cobra.Command, err error) int {
	var ec exitCodeError
	if errors.As(err, &ec) {
		if ec.msg != "" {
			fmt.Fprintf(c.stderr, "corral: %s\n", ec.msg)
		}
		return ec.code
	}
	var ue usageError
	usage := errors.As(err, &ue) || cmdkit.IsUsage(err) || !c.started
	fmt.Fprintf(c.stderr, "corral: %s\n", describe(err))
	if usage {
		if cmd != nil {
			fmt.Fprintf(c.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	}
	return exitError
}

// describe turns an error into a message for people: API errors get their
// field and a hint for the statuses people can act on.
func describe(err error) string {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	msg := ae.Error()
	switch {
	case ae.Status == http.StatusUnauthorized:
		msg += " (the server needs a valid token: set CORRAL_TOKEN or pass --token; an admin makes one with corral token create)"
	case ae.Status == http.StatusForbidden:
		msg += " (your token is not allowed to do this)"
	case ae.Status == http.StatusTooManyRequests:
		msg += " (try again later)"
	case ae.Status >= 500:
		msg = fmt.Sprintf("the server failed (HTTP %d): %s", ae.Status, msg)
	}
	return msg
}

// argsExactly is cobra.ExactArgs with a message naming what is missing.
func argsExactly(n int, what string) cobra.PositionalArgs { return cmdkit.ArgsExactly(n, what) }

// argsAtMost is cobra.MaximumNArgs with a message naming what may be given.
func argsAtMost(n int, what string) cobra.PositionalArgs { return cmdkit.ArgsAtMost(n, what) }

// argsAtLeast is cobra.MinimumNArgs with a message naming what is missing.
func argsAtLeast(n int, what string) cobra.PositionalArgs { return cmdkit.ArgsAtLeast(n, what) }

// argsSubcommand refuses any argument to a command that runs on its own and
// has subcommands, as a subcommand it does not have (cmdkit.ArgsSubcommand).
func argsSubcommand(cmd *cobra.Command, args []string) error { return cmdkit.ArgsSubcommand(cmd, args) }

// client checks the global flags and returns a client for the server they
// name; extra options (a transport, a user agent) apply after the CLI's.
func (c *cli) client(extra ...client.Option) (*client.Client, error) {
	if c.output != outputTable && c.output != outputJSON {
		return nil, usagef("--output %q: want table or json", c.output)
	}
	t, err := c.target() // login.go: flags, environment, config file
	if err != nil {
		return nil, err
	}
	return client.New(t.server, append([]client.Option{client.WithToken(t.token), client.WithUserAgent("corral-cli")}, extra...)...), nil
}

// json reports whether -o json was asked for.
func (c *cli) json() bool { return c.output == outputJSON }
