package cmdkit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// UsageError marks an error in the command line: the corral command exits
// with code 2 and a hint to run --help.
type UsageError struct{ err error }

// Usage marks err as an error in the command line.
func Usage(err error) error { return UsageError{err} }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

func (e UsageError) Error() string { return e.err.Error() }
func (e UsageError) Unwrap() error { return e.err }

// IsUsage reports whether err, or an error it wraps, is a UsageError.
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue)
}

// ArgsExactly is cobra.ExactArgs with a message naming what is missing.
func ArgsExactly(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return Usagef("missing %s", what)
		case len(args) > n:
			return Usagef("too many arguments: want only %s, got %q", what, args)
		}
		return nil
	}
}

// ArgsAtMost is cobra.MaximumNArgs with a message naming what may be
// given: an optional argument, or a few.
func ArgsAtMost(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > n {
			return Usagef("too many arguments: want at most %s, got %q", what, args)
		}
		return nil
	}
}

// ArgsAtLeast is cobra.MinimumNArgs with a message naming what is
// missing: a list, or a first argument that more may follow.
func ArgsAtLeast(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return Usagef("missing %s", what)
		}
		return nil
	}
}

// ArgsSubcommand checks the arguments of a command that runs on its own
// and has subcommands (corral nodes, corral policy): a word after it is a
// subcommand it does not have, and the message lists those it has.
func ArgsSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return Usagef("unknown command %q for %q: want no arguments, or a subcommand: %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
}
