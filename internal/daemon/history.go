package daemon

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/timespec"
)

// keepHistoryFlag is --keep-history: a duration that also takes days
// ("365d"); 0 keeps ended jobs for ever (docs/history.md).
type keepHistoryFlag time.Duration

func (k *keepHistoryFlag) String() string {
	d := time.Duration(*k)
	if d == 0 {
		return "0"
	}
	if d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

func (k *keepHistoryFlag) Type() string { return "duration" }

// Set reads "365d", "36h", "90m" or "0".
func (k *keepHistoryFlag) Set(v string) error {
	d, err := parseKeep(v)
	if err != nil {
		return err
	}
	*k = keepHistoryFlag(d)
	return nil
}

func parseKeep(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	var d time.Duration
	d, err := timespec.Duration(v)
	if err != nil || d > 100*365*timespec.Day {
		return 0, fmt.Errorf("%q: want a number of days (365d), or a duration (720h, 52w); 0 keeps ended jobs for ever", v)
	}
	if d > 0 && d < time.Minute {
		return 0, fmt.Errorf("%q: keep ended jobs at least a minute (0 keeps them for ever)", v)
	}
	return d, nil
}
