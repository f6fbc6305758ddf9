// Package e2e holds Corral's black-box end-to-end tests. They build the real
// corral binary once (TestMain), start real `corral up` processes with
// simulated GPUs, each on its own port and data directory, and drive them
// over HTTP and through the CLI, the way a user or a script would. Jobs run
// for real: the tests read their output files and the allocations the server
// recorded.
//
// Run them with: go test -race ./e2e/
package e2e
