// Package cmdkit holds what the corral binary's command packages share:
// the CLI (cmd/corral), the daemons' assembly and the bench tools each
// build their cobra commands with the same usage errors, argument checks,
// duration flags and tables, so that a wrong command line reads and exits
// the same way whichever of them refuses it.
package cmdkit
