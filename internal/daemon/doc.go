// Package daemon assembles Corral's long-running processes from their
// flags: corral up (server, in-process agent and embedded store), corral
// server (the control plane), corral agent (a node), the hidden corral
// shim that supervises one job, and corral store (the database offline).
// cmd/corral registers the commands it returns (NewUpCmd, NewServerCmd,
// NewAgentCmd, NewShimCmd, NewStoreCmd); what the CLI and these commands
// share lives in internal/cmdkit.
package daemon
