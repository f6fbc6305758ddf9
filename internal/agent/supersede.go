package agent

import (
	"errors"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// An agent's session ends when another registration of its node replaces
// it; its syncs are then refused with 403 wrong_node. That registration
// was one of:
//
//   - a replay of this agent's own registration (its agent id): this agent
//     registers again with a new session and has its node back;
//   - another agent (another agent id) that took the node over once this
//     one had been silent past the node TTL: this agent's registration is
//     refused with 409 node_in_use while the other holds the node. The
//     server settled this agent's tasks as lost when the other took the
//     node, and their jobs are requeued or failed there: this agent stops
//     them (they must not run on beside their retries), says so, and
//     registers again, every heldRetry, until the other has been silent
//     for the TTL;
//   - a copy of this agent (its data directory, with its agent id) running
//     elsewhere: the two would take the node from each other for ever, each
//     registration losing the other's tasks. Replaced again soon after it
//     registered, the agent waits longer each time before registering
//     (supersedeFirst, doubling up to supersedeMax) and says why.

// supersede counts how an agent has been refused its node.
type supersede struct {
	regAt time.Time // when the agent last registered
	count int       // replacements in a row, each within supersedeSoon of the registration before
	held  bool      // refused with node_in_use since the last registration (said once)
}

const (
	// supersedeSoon: replaced within this of registering counts as
	// replaced again (two agents with one id), not a one-off.
	supersedeSoon = time.Minute
	// supersedeFirst and supersedeMax bound the wait before registering
	// again after being replaced soon after the last registration.
	supersedeFirst = 10 * time.Second
	supersedeMax   = 10 * time.Minute
	// supersededGrace is how long the tasks of an agent whose node another
	// agent holds get between SIGTERM and SIGKILL.
	supersededGrace = 10 * time.Second
)

// registered notes a successful registration.
func (s *supersede) registered(at time.Time) {
	s.regAt, s.held = at, false
}

// next notes that the session was replaced at now, and returns how long
// to wait before registering again: at once the first time, longer each
// time it happens again soon after a registration.
func (s *supersede) next(now time.Time) time.Duration {
	if s.regAt.IsZero() || now.Sub(s.regAt) > supersedeSoon {
		s.count = 0
	}
	s.count++
	if s.count == 1 {
		return 0
	}
	wait := supersedeFirst
	for i := 2; i < s.count && wait < supersedeMax; i++ {
		wait *= 2
	}
	return min(wait, supersedeMax)
}

// superseded says that the agent's session was replaced and returns how
// long to wait before registering again.
func (a *Agent) superseded(s *supersede, err error) time.Duration {
	wait := s.next(time.Now())
	if wait == 0 {
		a.log.Warn("another registration of this node replaced this agent's session (a replay of its registration, or another agent that took the node over after this one was silent past the node TTL); registering again with a new session",
			"err", err)
		return 0
	}
	a.log.Error("this node's registration keeps being replaced soon after this agent registers: another agent with this agent's id (a copy of its data directory, or a replay of its registration) registers the node too; stop the other one. Registering again, but only after a wait, so that the two do not take the node from each other for ever",
		"times", s.count, "in", wait, "err", err)
	return wait
}

// heldElsewhere is the agent's answer to a registration refused because
// another agent holds its node (409 node_in_use): the first time since it
// last registered, it says so plainly and stops the tasks it still runs,
// which the server settled as lost when the other agent took the node.
func (a *Agent) heldElsewhere(s *supersede, err error) {
	if s.held {
		a.log.Debug("the node is still held by another agent; retrying", "err", err, "in", heldRetry)
		return
	}
	s.held = true
	stopped := 0
	for _, st := range a.tasks.statuses() {
		if st.State == api.TaskRunning {
			a.tasks.stop(taskKey{st.JobID, st.Attempt, st.Rank}, supersededGrace, "")
			stopped++
		}
	}
	a.log.Warn("another agent holds this node on the server (it took the node over while this agent was silent past the node TTL, or it runs elsewhere under this node's name): stop it, or give this agent another --node-name. This agent registers again, every "+heldRetry.String()+", once the other has been silent for the node TTL",
		"err", err, "tasks_stopped", stopped, "why_stopped", "the server settled them as lost when the other agent took the node; their jobs are requeued or failed there")
}

// apiCode is the code of the API error in err; "" for another error.
func apiCode(err error) string {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
