package main

import "github.com/spf13/cobra"

// newUpCmd is `corral up`: server, in-process agent and embedded store.
func newUpCmd() *cobra.Command {
	return &cobra.Command{Use: "up", Short: "Run the control plane, a local agent and the embedded store"}
}
