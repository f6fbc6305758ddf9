package nodebook

import (
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// Node states as the API shows them.
const (
	Up       = "up"
	Down     = "down"     // silent past its TTL
	Cordoned = "cordoned" // nothing new starts; running jobs go on
	Draining = "draining" // cordoned until its jobs end
	Drained  = "drained"  // draining, and no job is left
)

// State is a node's state for the API: down before all else; a draining
// node with no job left (active: the jobs placed on it, read only when
// draining) is drained.
func State(down, cordoned, draining bool, active int) string {
	switch {
	case down:
		return Down
	case draining && active == 0:
		return Drained
	case draining:
		return Draining
	case cordoned:
		return Cordoned
	}
	return Up
}

// Act is a node's cordon and drain after an admin's action: "cordon"
// (nothing new starts), "drain" (cordoned until its jobs end) or
// "uncordon" (both lifted). Another action is a 404 naming the three,
// and changes nothing.
func Act(action string, cordoned, draining bool) (bool, bool, error) {
	switch action {
	case "cordon":
		return true, draining, nil
	case "drain":
		return cordoned, true, nil
	case "uncordon":
		return false, false, nil
	}
	return cordoned, draining, api.NotFound("no node action %q; use cordon, drain or uncordon", action)
}

// A node whose agent says its log disk is full (api.AgentReport.DiskFull,
// under the agent's --min-free-disk) takes no new jobs: the scheduler's
// snapshot marks it not schedulable and carries why (sched.Node.DiskFull),
// so that a waiting job says node_disk_full in why-pending. Its running
// jobs go on. The state follows each report: it clears as soon as the
// agent reports enough free space again.

// MaxDiskNote bounds what an agent may say about its disk.
const MaxDiskNote = 300

// DiskNote bounds what an agent says about its disk ("": it is not full)
// to MaxDiskNote bytes of valid UTF-8.
func DiskNote(full string) string {
	if len(full) > MaxDiskNote {
		full = full[:MaxDiskNote]
	}
	return strings.ToValidUTF8(full, "")
}

// Disk is what a report of the disk changes of a node's state.
type Disk int

const (
	DiskSame   Disk = iota // no change
	DiskFull               // it filled up: the node takes no new jobs
	DiskRoom               // it has room again
	DiskReword             // still full, said in other words
)

// DiskChange is what going from the note was to now means.
func DiskChange(was, now string) Disk {
	switch {
	case was == now:
		return DiskSame
	case now != "" && was == "":
		return DiskFull
	case now == "":
		return DiskRoom
	}
	return DiskReword
}
