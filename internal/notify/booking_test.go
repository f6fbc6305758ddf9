package notify

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestPlanBookingReleased: a booking's release goes to its booker's, each
// user's and its project's endpoints, each once, and to nobody else's;
// the message is the event's sentence.
func TestPlanBookingReleased(t *testing.T) {
	reg, _ := newTestRegistry(t)
	root := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: "root"})
	ana := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: "ana"})
	vision := addEP(t, reg, api.EndpointRequest{Scope: api.ScopeProject, Project: "vision"})
	addEP(t, reg, api.EndpointRequest{Scope: api.ScopeUser, User: "bob"})
	addEP(t, reg, api.EndpointRequest{Scope: api.ScopeCluster})
	p := NewPlanner(reg, nil)
	ev := Event{Kind: ReservationReleased, At: time.Unix(3000, 0), Text: "Booking demo was released",
		Booking: &BookingInfo{Name: "demo", Owner: "root", Users: []string{"ana", "root"}, Project: "vision", GPUs: 2, IdleGPUSeconds: 3600}}
	items := p.Plan([]Event{ev})
	var got []string
	for _, it := range items {
		got = append(got, it.EndpointID)
		if it.Kind != string(ReservationReleased) {
			t.Errorf("kind %s", it.Kind)
		}
		var back Event
		if err := json.Unmarshal([]byte(it.Data), &back); err != nil || back.Booking == nil || back.Booking.Name != "demo" || back.Summary() != "Booking demo was released" {
			t.Errorf("stored event %s (%v)", it.Data, err)
		}
	}
	want := []string{root, ana, vision}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("endpoints %v, want %v (root's, ana's and vision's, once each)", got, want)
	}
}
