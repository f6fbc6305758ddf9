package sched

import (
	"testing"
	"time"
)

func TestPredict(t *testing.T) {
	m := time.Minute
	// History: ana ran "sweep" 10, 20, 30 min; "train" twice (too few);
	// bo ran 4-GPU jobs of 60 and 80 min and one of 100.
	hist := []Attempt{
		{User: "ana", Name: "sweep", Command: "c1", GPUs: 1, Ran: 10 * m},
		{User: "ana", Name: "sweep", Command: "c1", GPUs: 1, Ran: 20 * m},
		{User: "ana", Name: "sweep", Command: "c1", GPUs: 1, Ran: 30 * m},
		{User: "ana", Name: "train", Command: "c2", GPUs: 8, Ran: 300 * m},
		{User: "ana", Name: "train", Command: "c2", GPUs: 8, Ran: 500 * m},
		{User: "bo", Name: "a", Command: "x", GPUs: 4, Ran: 60 * m},
		{User: "bo", Name: "b", Command: "y", GPUs: 4, Ran: 80 * m},
		{User: "bo", Name: "c", Command: "z", GPUs: 4, Ran: 100 * m},
	}
	tests := map[string]struct {
		q               Query
		ok              bool
		basis           string
		point, low, top time.Duration
	}{
		"same name":                 {q: Query{User: "ana", Name: "sweep", GPUs: 1}, ok: true, basis: "name", point: 20 * m, low: 10 * m, top: 30 * m},
		"same command, new name":    {q: Query{User: "ana", Name: "new", Command: "c1", GPUs: 1}, ok: true, basis: "command", point: 20 * m, low: 10 * m, top: 30 * m},
		"thin name: same GPU count": {q: Query{User: "bo", Name: "a", Command: "x", GPUs: 4}, ok: true, basis: "gpus", point: 80 * m, low: 60 * m, top: 100 * m},
		"nothing close: the cluster": {q: Query{User: "cy", Name: "q", GPUs: 2}, ok: true, basis: "cluster",
			point: (10 + 20 + 30 + 300 + 500 + 60 + 80 + 100) * m / 8, low: 10 * m, top: 500 * m},
		"the time limit caps":       {q: Query{User: "ana", Name: "sweep", TimeLimit: 15 * m}, ok: true, basis: "name", point: 15 * m, low: 10 * m, top: 15 * m},
		"outlived: the longer runs": {q: Query{User: "ana", Name: "sweep", Elapsed: 15 * m}, ok: true, basis: "name", point: 25 * m, low: 20 * m, top: 30 * m},
		"outlived them all: twice":  {q: Query{User: "ana", Name: "sweep", Elapsed: 40 * m}, ok: true, basis: "name", point: 80 * m, low: 40 * m, top: 80 * m},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := NewPredictor(0, 0)
			for _, a := range hist {
				p.Observe(a)
			}
			got, ok := p.Predict(tc.q)
			if ok != tc.ok || got.Basis != tc.basis || got.Point != tc.point || got.Low != tc.low || got.High != tc.top {
				t.Fatalf("got %+v (ok %v), want %s point %v range %v-%v", got, ok, tc.basis, tc.point, tc.low, tc.top)
			}
		})
	}
}

// Without enough history there is no estimate; only the most recent runs
// count.
func TestPredictHistory(t *testing.T) {
	p := NewPredictor(3, 2)
	if _, ok := p.Predict(Query{User: "ana"}); ok {
		t.Fatal("an estimate from no history")
	}
	p.Observe(Attempt{User: "ana", Name: "n", Ran: time.Hour})
	if _, ok := p.Predict(Query{User: "ana", Name: "n"}); ok {
		t.Fatal("an estimate from one run, with two needed")
	}
	for _, d := range []time.Duration{1, 1, 1, 10, 10, 10} {
		p.Observe(Attempt{User: "ana", Name: "n", Ran: d * time.Minute})
	}
	got, _ := p.Predict(Query{User: "ana", Name: "n"})
	if got.Point != 10*time.Minute || got.Samples != 3 {
		t.Fatalf("got %+v, want the last 3 runs' mean, 10m", got)
	}
	if s := got.String("ana"); s != "from 3 runs of n by ana" {
		t.Fatalf("basis %q", s)
	}
}
