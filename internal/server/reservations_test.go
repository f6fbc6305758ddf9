package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/bookings"
)

// bookingStart is a start an hour or more ahead, 10 minutes apart per n,
// so that the role matrix's one-GPU bookings never meet.
func bookingStart(n int64) string {
	return time.Now().UTC().Truncate(time.Minute).Add(time.Hour + time.Duration(n)*10*time.Minute).Format(time.RFC3339)
}

// booking books a GPU for alice, for a minute, and returns its name.
func (e *authEnv) booking() string {
	e.t.Helper()
	n := e.seq.Add(1)
	name, start, g, d := fmt.Sprintf("alice-%d", n), bookingStart(n), 1, api.RawValue(`"1m"`)
	if _, err := e.o.FeatureOps().Bookings.Create(context.Background(), api.ReservationRequest{Name: name, GPUs: &g, Start: &start, Duration: d},
		bookings.Booker{User: "alice"}); err != nil {
		e.t.Fatal(err)
	}
	return name
}

// TestReservationsAPI: the routes answer the rules' refusals with their
// status, code and field, and the bookings they make.
func TestReservationsAPI(t *testing.T) {
	e := newAuthEnv(t)
	// A Tuesday's midnight (UTC), a day ahead at least: every booking of
	// the test then falls in one ISO week, which the weekly allowance
	// counts (a start near Monday split one across two weeks, and the
	// test failed on Saturday afternoons).
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(48 * time.Hour)
	for start.Weekday() != time.Tuesday {
		start = start.Add(24 * time.Hour)
	}
	at := func(d time.Duration) string { return start.Add(d).Format(time.RFC3339) }
	cases := []struct {
		name, caller, method, path, body string
		status                           int
		code, field, msg                 string
	}{
		{"admin books all 8 for alice", "admin", "POST", "/reservations", `{"name":"vision","gpus":8,"start":"` + at(0) + `","duration":"8h","users":["alice"],"project":"vision"}`, 201, "", "", ""},
		{"an overlap is refused naming the booking", "owner", "POST", "/reservations", `{"name":"mine","gpus":1,"start":"` + at(time.Hour) + `","duration":"1h"}`, 422, "booking_conflict", "gpus", "GPUs 0-7 on n1 are booked by vision"},
		{"for someone else", "owner", "POST", "/reservations", `{"name":"mine","gpus":1,"start":"` + at(9*time.Hour) + `","duration":"1h","users":["bob"]}`, 403, "forbidden", "users", "yourself"},
		{"maint", "owner", "POST", "/reservations", `{"name":"mine","gpus":1,"start":"` + at(9*time.Hour) + `","duration":"1h","flags":["maint"]}`, 403, "forbidden", "flags", ""},
		{"past the allowance", "owner", "POST", "/reservations", `{"name":"mine","gpus":8,"start":"` + at(9*time.Hour) + `","duration":"9h"}`, 422, "booking_allowance_exceeded", "gpus", "the allowance is 64 GPU-hours"},
		{"a bad start", "owner", "POST", "/reservations", `{"name":"mine","gpus":1,"start":"tomorrow","duration":"1h"}`, 422, "invalid_field", "start", "RFC 3339"},
		{"an unknown field", "owner", "POST", "/reservations", `{"name":"mine","gpus":1,"color":"red"}`, 400, "unknown_field", "color", ""},
		{"gpus as text", "owner", "POST", "/reservations", `{"name":"mine","gpus":"1"}`, 422, "invalid_field", "gpus", ""},
		{"alice books within it", "owner", "POST", "/reservations", `{"name":"mine","gpus":8,"start":"` + at(9*time.Hour) + `","duration":"8h"}`, 201, "", "", ""},
		{"bob may not change it", "other", "PATCH", "/reservations/mine", `{"gpus":1}`, 403, "forbidden", "", ""},
		{"nor delete it", "other", "DELETE", "/reservations/mine", ``, 403, "forbidden", "", ""},
		{"alice may not grow it past the allowance", "owner", "PATCH", "/reservations/mine", `{"duration":"9h"}`, 422, "booking_allowance_exceeded", "gpus", ""},
		{"she shrinks it", "owner", "PATCH", "/reservations/mine", `{"gpus":4}`, 200, "", "", ""},
		{"no such booking", "viewer", "GET", "/reservations/nope", ``, 404, "not_found", "", ""},
		{"she deletes it", "owner", "DELETE", "/reservations/mine", ``, 200, "", "", ""},
		{"gone", "viewer", "GET", "/reservations/mine", ``, 404, "not_found", "", ""},
	}
	for _, c := range cases {
		resp, b := e.do(c.caller, c.method, c.path, c.body, nil)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: got %d, want %d: %s", c.name, resp.StatusCode, c.status, b)
		}
		if c.status >= 400 {
			var eb api.ErrorBody
			if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code != c.code || eb.Error.Field != c.field || !strings.Contains(eb.Error.Message, c.msg) {
				t.Fatalf("%s: got %s, want code %s field %q saying %q", c.name, b, c.code, c.field, c.msg)
			}
		}
	}
	resp, b := e.do("viewer", "GET", "/reservations", "", nil)
	var l api.ReservationList
	if resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil || len(l.Reservations) != 1 {
		t.Fatalf("GET /reservations: %d %s", resp.StatusCode, b)
	}
	v := l.Reservations[0]
	if v.Name != "vision" || v.Owner != "root" || len(v.Allocation) != 8 || v.State != api.BookingScheduled || v.Project != "vision" || !v.End.Equal(start.Add(8*time.Hour)) {
		t.Fatalf("vision: %+v", v)
	}
}
