package notify

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// BenchmarkPlan routes a batch of 512 job failures (the orchestrator's
// largest batch), each of a different user, with 10 endpoints (the
// baseline) and with 10,000 (the most a cluster keeps): routing is a map
// lookup per event, so the cost follows the rows made, not the
// endpoints kept. With 10,000 users' own defaults (each "fail", so the
// same rows are made) the Planner looks each job's user up once more.
func BenchmarkPlan(b *testing.B) {
	for _, c := range []struct{ n, defaults int }{{10, 0}, {10000, 0}, {10, 10000}} {
		n := c.n
		name := fmt.Sprintf("endpoints=%d", n)
		if c.defaults > 0 {
			name += fmt.Sprintf("/user_defaults=%d", c.defaults)
		}
		b.Run(name, func(b *testing.B) {
			seal, _ := NewSealer(make([]byte, 32))
			reg, err := NewRegistry(context.Background(), &MemStore{}, seal, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := range c.defaults {
				if _, err := reg.SetDefaults(context.Background(), fmt.Sprintf("u%d", i), "fail", "root"); err != nil {
					b.Fatal(err)
				}
			}
			for i := range n {
				if _, err := reg.Add(context.Background(), api.EndpointRequest{Kind: api.EndpointSlack, URL: "https://hooks.example.com/x",
					Scope: api.ScopeUser, User: fmt.Sprintf("u%d", i)}, "root"); err != nil {
					b.Fatal(err)
				}
			}
			p := NewPlanner(reg, nil)
			evs := make([]Event, 512)
			for i := range evs {
				evs[i] = Event{Kind: JobFailed, At: time.Unix(1000, 0), Job: &JobInfo{ID: fmt.Sprint("j", i), User: fmt.Sprintf("u%d", i%10), Project: "p", State: "failed"}}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if rows := p.Plan(evs); len(rows) != 512 {
					b.Fatalf("%d rows", len(rows))
				}
			}
		})
	}
}
