package bench

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/client"
)

// CLI is what the bench commands take from the corral command line that
// runs them: its outputs, its client and its ways of printing.
type CLI struct {
	Stdout, Stderr io.Writer
	// Client returns a client for the server and token the global flags
	// (and the environment, and the client config) name; extra options
	// apply after the CLI's own.
	Client func(extra ...client.Option) (*client.Client, error)
	// Emit prints v as JSON with -o json, and with table otherwise.
	Emit func(v any, table func(io.Writer) error) error
	// Describe turns an error into a message for people.
	Describe func(error) string
}

// cmds is one invocation's bench commands: they share the CLI's pieces.
type cmds struct {
	CLI
}

// NewCmd returns corral bench and its subcommands.
func NewCmd(c CLI) *cobra.Command {
	return (&cmds{c}).newBenchCmd()
}
