package daemon

import (
	"testing"
	"time"
)

func TestParseKeep(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"365d": 365 * 24 * time.Hour, "1.5d": 36 * time.Hour, "720h": 720 * time.Hour, "0": 0, "0d": 0,
	} {
		if got, err := parseKeep(in); err != nil || got != want {
			t.Errorf("parseKeep(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1d", "d", "year", "10s", "-5h"} {
		if got, err := parseKeep(bad); err == nil {
			t.Errorf("parseKeep(%q) = %v, want an error", bad, got)
		}
	}
}
