package sched

import (
	"fmt"
	"time"
)

// Why pending, as sentences.
//
// A cycle may leave thousands of jobs waiting, and some callers (the trace
// simulator) never read why. So a cycle records for each waiting job only
// a note: which sentence, and the few facts it needs, shared by every job
// for which they are the same (one per job shape while the free GPUs stay
// the same; one per cycle for the reservation). Pending.Message builds the
// sentence when asked, from facts recorded when the job was considered, so
// it says what it would have said had it been built then.

type noteKind uint8

const (
	noteText        noteKind = iota // src.text as it is
	noteNoFit                       // the job's shape does not fit the free GPUs now
	noteUnsat                       // no node could ever run the job's shape
	noteBackoff                     // requeued after a loss: it waits until src.at
	noteReservation                 // it would fit, but for the head's reservation
	noteBegin                       // it waits for its begin time, src.at
)

// note is what a Pending's Message is built from.
type note struct {
	kind  noteKind
	given bool          // noteReservation: the job gave its own estimate
	est   time.Duration // noteReservation: the job's estimate
	src   *noteSrc      // shared between notes; never modified once recorded
}

// noteSrc holds the facts of one or more notes.
type noteSrc struct {
	text string // noteText

	// noteNoFit, noteUnsat: what the job asks for, and (noteNoFit) what
	// the free GPUs offered it.
	shape    shapeDesc
	anySched bool   // some node accepts new jobs
	largest  int    // one node wanted: the most free matching GPUs on one node,
	node     string // and on which ("": no schedulable node has such GPUs)
	fitting  int    // more nodes wanted: the nodes with that many free
	foreign  int    // matching GPUs busy with processes Corral did not start

	// noteBackoff, noteReservation
	now      time.Time
	head     string    // the job holding the reservation
	at       time.Time // when the reservation (or the backoff) ends
	backfill bool      // backfill is on
}

// shapeDesc is what a job asks for, as describe says it.
type shapeDesc struct {
	gpus, nodes int
	mem         int64
	typ         string
}

func descOf(j *Job) shapeDesc {
	return shapeDesc{gpus: j.GPUs, nodes: nodesWanted(j), mem: j.MinMemoryMiB, typ: j.GPUType}
}

// textNote is a note whose sentence is already built.
func textNote(s string) note { return note{kind: noteText, src: &noteSrc{text: s}} }

// noNodesText is why nothing fits while every node refuses new jobs.
const noNodesText = "no node accepts new jobs (all are cordoned, draining or down)"

// Message is a sentence for people saying why the job stays queued. It is
// built on each call from facts the cycle recorded; safe for concurrent use.
func (p Pending) Message() string {
	n := &p.note
	s := n.src
	if s == nil {
		return ""
	}
	switch n.kind {
	case noteNoFit:
		return s.noFitText()
	case noteUnsat:
		return fmt.Sprintf("no node could ever run it: it needs %s on %d node(s)", describe(s.shape), s.shape.nodes)
	case noteBackoff:
		return fmt.Sprintf("requeued after a loss; it may start again at %s", clock(s.at, s.now))
	case noteBegin:
		return fmt.Sprintf("it may start at its begin time, %s (--begin)", clock(s.at, s.now))
	case noteReservation:
		return fmt.Sprintf("it would fit, but job %s holds a reservation until %s%s", s.head, clock(s.at, s.now), backfillHint(s.backfill, n.given, n.est))
	}
	return s.text
}

// noFitText says why a shape does not fit the free GPUs, and how many of
// the GPUs it could use run processes Corral did not start.
func (s *noteSrc) noFitText() string {
	text := s.noFitBase()
	if s.foreign > 0 {
		gpus := "GPUs run"
		if s.foreign == 1 {
			gpus = "GPU runs"
		}
		text += fmt.Sprintf(" (%d such %s processes Corral did not start: corral nodes lists them)", s.foreign, gpus)
	}
	return text
}

func (s *noteSrc) noFitBase() string {
	switch {
	case !s.anySched:
		return noNodesText
	case s.shape.nodes > 1:
		return fmt.Sprintf("needs %s on each of %d nodes; %d nodes have that free", describe(s.shape), s.shape.nodes, s.fitting)
	case s.node == "":
		return fmt.Sprintf("needs %s on one node; no schedulable node has such GPUs", describe(s.shape))
	case s.largest == 0:
		return fmt.Sprintf("needs %s on one node; every such GPU is in use", describe(s.shape))
	}
	return fmt.Sprintf("needs %s on one node; the largest free block is %d on %s", describe(s.shape), s.largest, s.node)
}

func backfillHint(backfill, given bool, est time.Duration) string {
	switch {
	case !backfill:
		return ""
	case !given:
		return "; give it an estimated_duration to let it backfill"
	}
	return fmt.Sprintf("; its estimate (%s) runs past it", est.Round(time.Second))
}

// describe says what the job asks for per node, e.g. "4 H100 GPUs with at
// least 40 GB each".
func describe(d shapeDesc) string {
	s := fmt.Sprintf("%d", d.gpus)
	if d.typ != "" {
		s += " " + d.typ
	}
	if d.gpus == 1 {
		s += " GPU"
	} else {
		s += " GPUs"
	}
	if d.mem > 0 {
		s += fmt.Sprintf(" with at least %g GB each", float64(d.mem)/1024)
	}
	return s
}

// clock formats a reservation time for people: "14:02 UTC", or with the
// date when it is not within a day.
func clock(t, now time.Time) string {
	if t.Equal(never) {
		return "an unknown time"
	}
	t = t.UTC()
	if t.Sub(now) < 20*time.Hour {
		return t.Format("15:04 MST")
	}
	return t.Format("Jan 2 15:04 MST")
}
