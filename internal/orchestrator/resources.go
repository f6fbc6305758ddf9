package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
)

// validContainment checks a registration's containment ("" is allowed:
// an agent that does not say).
func validContainment(c string) error {
	switch c {
	case "", api.ContainCgroupV2, api.ContainCgroupV1, api.ContainProcessGroup:
		return nil
	}
	return api.Invalid("containment", "%q: want one of %s, %s, %s", truncate(c, 40),
		api.ContainCgroupV2, api.ContainCgroupV1, api.ContainProcessGroup)
}

// containmentOf is a node's containment as shown: process-group when its
// agent did not say.
func containmentOf(n *Node) string {
	if n.Containment == "" {
		return api.ContainProcessGroup
	}
	return n.Containment
}
