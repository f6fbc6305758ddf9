package cmdkit

import (
	"errors"
	"fmt"

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
