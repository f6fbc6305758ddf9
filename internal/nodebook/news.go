package nodebook

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// News is telemetry or liveness news about a node, queued by whoever
// hears it (an agent's sync, the transport's silence, its disk note)
// without waiting for the loop, and applied by the loop in the order it
// came (Book.Apply).
type News struct {
	Node     string
	At       time.Time
	Down     bool // silent past its TTL
	Readings []api.GPUReading
	Foreign  []api.ForeignProcess
	Disk     *string // its log disk's note (DiskNote; "": it has room)
}

// Change is what one piece of News changed of the Book.
type Change int

const (
	Unchanged    Change = iota // a node the Book does not know, a down node's silence, a disk note as it was
	WentDown                   // an up node silent past its TTL is down (its state is stored)
	Reported                   // a report from a node that was up
	CameBack                   // a report from a node that was down: it is up (its state is stored)
	DiskFilled                 // its log disk filled up: it takes no new jobs
	DiskHasRoom                // its log disk has room again
	DiskReworded               // its log disk is still full, said in other words
)

// Apply applies one piece of news to the Book (Silent, Report,
// Node.SetDiskFull) and says what it changed, with the node (nil when
// the Book has no such node).
func (b *Book) Apply(ev News) (*Node, Change) {
	switch {
	case ev.Disk != nil:
		n := b.Get(ev.Node)
		if n == nil {
			return nil, Unchanged
		}
		switch n.SetDiskFull(*ev.Disk) {
		case DiskFull:
			return n, DiskFilled
		case DiskRoom:
			return n, DiskHasRoom
		case DiskReword:
			return n, DiskReworded
		}
		return n, Unchanged
	case ev.Down:
		n, flipped := b.Silent(ev.Node)
		if !flipped {
			return n, Unchanged
		}
		return n, WentDown
	default:
		n, back := b.Report(ev.Node, ev.At, ev.Readings, ev.Foreign)
		switch {
		case n == nil:
			return nil, Unchanged
		case back:
			return n, CameBack
		}
		return n, Reported
	}
}
