package sched

import "strings"

// diskFullNote is why a job waits when no node accepts new jobs and some
// refuse them because their log disk is full (Node.DiskFull): the
// sentence names each such node and what its agent said. nil when no node
// is refusing for that reason (the job then waits with ReasonNoNodes).
// Made once per cycle.
func (c *cycle) diskFullNote() *note {
	if c.diskChecked {
		return c.diskNote
	}
	c.diskChecked = true
	var parts []string
	for _, n := range c.s.Nodes {
		if n.DiskFull != "" {
			parts = append(parts, "node "+n.ID+" takes none while "+n.DiskFull)
		}
	}
	if len(parts) > 0 {
		nt := textNote("no node accepts new jobs: " + strings.Join(parts, "; "))
		c.diskNote = &nt
	}
	return c.diskNote
}
