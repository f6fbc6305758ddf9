package limits

import (
	"testing"
	"time"
)

func TestAlarm(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name string
		arms []time.Duration // dues after now, armed in turn
		soon bool            // fires: awaited up to 5s, else watched for 50ms
	}{
		{"not armed", nil, false},
		{"due now", []time.Duration{0}, true},
		{"due past", []time.Duration{-time.Minute}, true},
		{"due in an hour", []time.Duration{time.Hour}, false},
		{"an earlier due replaces a later one", []time.Duration{time.Hour, 0}, true},
		{"a later due leaves an earlier one", []time.Duration{0, time.Hour}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a Alarm
			for _, d := range c.arms {
				a.Arm(now.Add(d), now)
			}
			if (a.C() == nil) != (len(c.arms) == 0) {
				t.Fatalf("C() nil = %v with %d arms", a.C() == nil, len(c.arms))
			}
			wait := 50 * time.Millisecond
			if c.soon {
				wait = 5 * time.Second
			}
			select {
			case <-a.C():
				if !c.soon {
					t.Fatal("fired, want not yet")
				}
				a.Fired()
				if a.C() != nil {
					t.Fatal("C() after Fired is not nil")
				}
			case <-time.After(wait):
				if c.soon {
					t.Fatal("did not fire")
				}
			}
		})
	}
}
