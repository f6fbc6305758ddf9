package sched

import (
	"math"
	"time"
)

// Ledger keeps each user's and project's past GPU usage, decayed
// exponentially with a half-life: GPU-seconds used one half-life ago count
// half. It is a plain value with no clock of its own: callers say when
// usage happened and when they ask. Not safe for concurrent use.
type Ledger struct {
	halfLife time.Duration
	users    map[string]decayed
	projects map[string]decayed
}

// decayed is a value as of a time.
type decayed struct {
	v  float64
	at time.Time
}

func (d decayed) valueAt(t time.Time, halfLife time.Duration) float64 {
	if d.v == 0 || !t.After(d.at) {
		return d.v
	}
	return d.v * math.Exp2(-float64(t.Sub(d.at))/float64(halfLife))
}

// NewLedger returns an empty ledger; halfLife <= 0 means DefaultHalfLife.
func NewLedger(halfLife time.Duration) *Ledger {
	if halfLife <= 0 {
		halfLife = DefaultHalfLife
	}
	return &Ledger{halfLife: halfLife, users: map[string]decayed{}, projects: map[string]decayed{}}
}

// HalfLife is the ledger's half-life.
func (l *Ledger) HalfLife() time.Duration { return l.halfLife }

// Add records gpuSeconds of use by a user in a project, at the given time.
func (l *Ledger) Add(user, project string, gpuSeconds float64, at time.Time) {
	l.users[user] = add(l.users[user], gpuSeconds, at, l.halfLife)
	l.projects[project] = add(l.projects[project], gpuSeconds, at, l.halfLife)
}

func add(d decayed, v float64, at time.Time, halfLife time.Duration) decayed {
	if d.at.IsZero() {
		return decayed{v, at}
	}
	if at.Before(d.at) {
		// An older record: decay it to the entry's time instead.
		return decayed{d.v + decayed{v, at}.valueAt(d.at, halfLife), d.at}
	}
	return decayed{d.valueAt(at, halfLife) + v, at}
}

// Usage returns every user's and project's decayed GPU-seconds at now.
func (l *Ledger) Usage(now time.Time) Usage {
	u := Usage{Users: make(map[string]float64, len(l.users)), Projects: make(map[string]float64, len(l.projects))}
	for k, d := range l.users {
		u.Users[k] = d.valueAt(now, l.halfLife)
	}
	for k, d := range l.projects {
		u.Projects[k] = d.valueAt(now, l.halfLife)
	}
	return u
}

// UserUsage returns one user's decayed GPU-seconds at now: what Usage
// would hold for the user.
func (l *Ledger) UserUsage(user string, now time.Time) float64 {
	return l.users[user].valueAt(now, l.halfLife)
}

// ProjectUsage is UserUsage for a project.
func (l *Ledger) ProjectUsage(project string, now time.Time) float64 {
	return l.projects[project].valueAt(now, l.halfLife)
}

// estimatorWindow is how many past run times per user an Estimator keeps.
const estimatorWindow = 20

// Estimator learns each user's typical run time from their finished jobs:
// the mean of the last estimatorWindow. Not safe for concurrent use.
type Estimator struct {
	runs map[string][]time.Duration
}

// NewEstimator returns an estimator with no history.
func NewEstimator() *Estimator { return &Estimator{runs: map[string][]time.Duration{}} }

// Observe records that one of the user's jobs ran for d.
func (e *Estimator) Observe(user string, d time.Duration) {
	r := append(e.runs[user], d)
	if len(r) > estimatorWindow {
		r = r[len(r)-estimatorWindow:]
	}
	e.runs[user] = r
}

// Estimate returns the user's mean run time, and false without history.
func (e *Estimator) Estimate(user string) (time.Duration, bool) {
	r := e.runs[user]
	if len(r) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, d := range r {
		sum += d
	}
	return sum / time.Duration(len(r)), true
}
