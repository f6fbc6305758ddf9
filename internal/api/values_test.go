package api

import (
	"strings"
	"testing"
	"time"
)

// ParseSeconds reads what it always read (seconds, Go durations) and,
// through timespec, days, weeks and Slurm's forms; its error names them.
func TestParseSecondsForms(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90": 90 * time.Second, "1.5": 1500 * time.Millisecond, "90s": 90 * time.Second, "1h30m": 90 * time.Minute,
		"2d": 48 * time.Hour, "1w": 7 * 24 * time.Hour, "1:30:00": 90 * time.Minute, "2-00:00:00": 48 * time.Hour, "0:05": 5 * time.Second,
	} {
		s, err := ParseSeconds(in)
		if err != nil || s.Duration() != want {
			t.Errorf("ParseSeconds(%q) = %v, %v; want %v", in, s.Duration(), err, want)
		}
	}
	for _, in := range []string{"soon", "-5", "-1h", "400d"} {
		if _, err := ParseSeconds(in); err == nil {
			t.Errorf("ParseSeconds(%q): want an error", in)
		}
	}
	if _, err := ParseSeconds("soon"); !strings.Contains(err.Error(), "D-HH:MM:SS") {
		t.Errorf("error %q does not name the forms", err)
	}
}
