package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestFarBookingRefused: a booking whose end falls past what the store
// can write (issue 24: year 10000) is refused with 422 naming the field,
// changes nothing, and the server goes on taking changes and answering
// reads.
func TestFarBookingRefused(t *testing.T) {
	e := newAuthEnv(t)
	for _, c := range []struct{ body, field string }{
		{`{"name":"x3","gpus":1,"start":"9999-12-31T23:00:00Z","duration":"2h"}`, "start"},
		{`{"name":"x4","gpus":1,"start":"2030-01-01T00:00:00Z","end":"9999-12-31T23:00:00Z"}`, "end"},
		{`{"name":"x5","gpus":1,"start":"2199-12-31T23:00:00Z","duration":"2h"}`, "duration"},
		{`{"name":"x6","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"8785h"}`, "duration"},
		{`{"name":"x7","gpus":1,"start":"2030-01-01T00:00:00Z","duration":1e300}`, "duration"},
		{`{"name":"x8","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"2h","project":"a\u0000b"}`, "project"},
		{`{"name":"x9","gpus":1,"start":"2030-01-01T00:00:00Z","duration":"2h","gpu_type":"\u0000"}`, "gpu_type"},
	} {
		resp, b := e.do("owner", "POST", "/reservations", c.body, nil)
		var eb api.ErrorBody
		if resp.StatusCode != 422 || json.Unmarshal(b, &eb) != nil || eb.Error.Field != c.field {
			t.Fatalf("POST /reservations %s: %d %s, want 422 naming %s", c.body, resp.StatusCode, b, c.field)
		}
	}
	resp, b := e.do("viewer", "GET", "/reservations", "", nil)
	var l api.ReservationList
	if resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil || len(l.Reservations) != 0 {
		t.Fatalf("GET /reservations: %d %s", resp.StatusCode, b)
	}
	// Changes still go through.
	resp, b = e.do("owner", "POST", "/reservations", `{"name":"ok","gpus":1,"start":"`+bookingStart(1)+`","duration":"1h"}`, nil)
	if resp.StatusCode != 201 {
		t.Fatalf("a later booking: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do("owner", "POST", "/queue/submit", `{"command":"true","gpu_count":0}`, nil)
	if resp.StatusCode >= 300 || strings.Contains(string(b), "store_unavailable") {
		t.Fatalf("a later submission: %d %s", resp.StatusCode, b)
	}
}
