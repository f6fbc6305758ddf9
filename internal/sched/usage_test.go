package sched

import (
	"math"
	"testing"
	"time"
)

func TestLedgerDecays(t *testing.T) {
	l := NewLedger(24 * time.Hour)
	l.Add("ana", "vision", 3600, t0)
	l.Add("ana", "vision", 3600, t0.Add(24*time.Hour)) // one half-life later
	l.Add("bob", "nlp", 100, t0.Add(-24*time.Hour))    // out of order, still counted
	u := l.Usage(t0.Add(48 * time.Hour))
	// ana: 3600/4 + 3600/2 = 2700; bob: 100/8 = 12.5.
	if math.Abs(u.Users["ana"]-2700) > 1e-6 || math.Abs(u.Projects["vision"]-2700) > 1e-6 || math.Abs(u.Users["bob"]-12.5) > 1e-6 {
		t.Fatalf("usage = %+v", u)
	}
}

func TestEstimatorLearnsPerUser(t *testing.T) {
	e := NewEstimator()
	if _, ok := e.Estimate("ana"); ok {
		t.Fatal("estimate without history")
	}
	for i := range 25 {
		e.Observe("ana", time.Duration(i)*time.Minute)
	}
	// The last 20 runs are 5..24 minutes: mean 14m30s.
	if d, ok := e.Estimate("ana"); !ok || d != 14*time.Minute+30*time.Second {
		t.Fatalf("estimate = %v %v", d, ok)
	}
}
