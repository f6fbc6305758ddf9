package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/timespec"
)

// Priority is a job priority: low=1, normal=2, high=3, critical=4. It is
// written as its name and read from a name or a number.
type Priority int

// The priority levels.
const (
	PriorityLow      Priority = 1
	PriorityNormal   Priority = 2
	PriorityHigh     Priority = 3
	PriorityCritical Priority = 4
)

var priorityNames = [...]string{"", "low", "normal", "high", "critical"}

// String returns the priority's name.
func (p Priority) String() string {
	if p >= PriorityLow && p <= PriorityCritical {
		return priorityNames[p]
	}
	return strconv.Itoa(int(p))
}

// MarshalJSON writes the priority's name.
func (p Priority) MarshalJSON() ([]byte, error) { return json.Marshal(p.String()) }

// UnmarshalJSON reads a name or a number (see ParsePriority).
func (p *Priority) UnmarshalJSON(b []byte) error {
	v, err := ParsePriorityJSON(b)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// ParsePriority reads "low", "normal", "high", "critical" (any case) or
// "1".."4".
func ParsePriority(s string) (Priority, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for i, n := range priorityNames {
		if i > 0 && t == n {
			return Priority(i), nil
		}
	}
	if n, err := strconv.Atoi(t); err == nil && n >= 1 && n <= 4 {
		return Priority(n), nil
	}
	return 0, fmt.Errorf("priority %q is not one of low, normal, high, critical (or 1-4)", s)
}

// ParsePriorityJSON reads a priority from a JSON string or number.
func ParsePriorityJSON(b []byte) (Priority, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, fmt.Errorf("priority: %w", err)
		}
		return ParsePriority(s)
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || f != math.Trunc(f) || f < 1 || f > 4 {
		return 0, fmt.Errorf("priority %s is not one of low, normal, high, critical (or 1-4)", truncate(string(b), 40))
	}
	return Priority(f), nil
}

// Seconds is a duration in seconds. It is written as a number and read from
// a number of seconds or a Go duration string such as "1h30m".
type Seconds float64

// Duration converts s to a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(float64(s) * float64(time.Second)) }

// UnmarshalJSON reads seconds or a duration string (see ParseSecondsJSON).
func (s *Seconds) UnmarshalJSON(b []byte) error {
	v, err := ParseSecondsJSON(b)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// maxSeconds bounds durations at MaxDuration (one year, bounds.go):
// anything longer is a typo.
const maxSeconds = float64(MaxDuration / time.Second)

// ParseSeconds reads a number of seconds ("90") or any duration
// timespec.Parse reads: "90s", "1h30m", "2d", "1w", Slurm's "1:30:00" and
// "2-00:00:00".
func ParseSeconds(str string) (Seconds, error) {
	t := strings.TrimSpace(str)
	var v float64
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		v = f
	} else if d, err := timespec.Parse(t, timespec.Seconds); err == nil {
		v = d.Seconds()
	} else {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxSeconds {
		return 0, fmt.Errorf("%s must be between 0 and one year", truncate(str, 40))
	}
	return Seconds(v), nil
}

// ParseSecondsJSON reads a JSON number of seconds or a duration string.
func ParseSecondsJSON(b []byte) (Seconds, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
		return ParseSeconds(s)
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, fmt.Errorf("%s is neither seconds nor a duration (%s)", truncate(string(b), 40), timespec.Forms)
	}
	return ParseSeconds(strconv.FormatFloat(f, 'f', -1, 64))
}

// RawValue is a JSON value kept raw for parsing with a field-aware error.
type RawValue = json.RawMessage

// IsNull reports whether a raw value was absent or null.
func IsNull(v RawValue) bool {
	t := bytes.TrimSpace(v)
	return len(t) == 0 || string(t) == "null"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
