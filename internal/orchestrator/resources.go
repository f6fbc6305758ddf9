package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
)

// containmentOf is a node's containment as shown: process-group when its
// agent did not say.
func containmentOf(n *Node) string {
	if n.Containment == "" {
		return api.ContainProcessGroup
	}
	return n.Containment
}
