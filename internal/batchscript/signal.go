package batchscript

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/timespec"
)

// DefaultSignalLead is how long before the time limit --signal's signal
// comes when no @TIME is given (Slurm's 60 seconds).
const DefaultSignalLead = 60 * time.Second

// signals are the signals --signal may name, by their numbers on Linux.
var signals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12,
	"PIPE": 13, "ALRM": 14, "TERM": 15, "CONT": 18, "STOP": 19, "TSTP": 20, "URG": 23,
	"XCPU": 24, "XFSZ": 25, "VTALRM": 26, "PROF": 27, "WINCH": 28, "IO": 29, "PWR": 30,
}

// Signal is --signal: Name (such as "USR1"), Number, Lead (how long
// before the time limit) and Batch (B:, the job's main process only).
type Signal struct {
	Name   string
	Number int
	Lead   time.Duration
	Batch  bool
}

// String writes s in the form ParseSignal reads: "B:USR1@90".
func (s Signal) String() string {
	b := ""
	if s.Batch {
		b = "B:"
	}
	return fmt.Sprintf("%s%s@%d", b, s.Name, int64(s.Lead/time.Second))
}

// ParseSignal reads sbatch --signal=[{R|B}:]SIG[@TIME]: SIG a name (USR1,
// SIGUSR1) or a number, TIME seconds (or a duration such as 5m), 60 by
// default. R: (reservation) is refused, as Corral has no such thing.
func ParseSignal(s string) (Signal, error) {
	var sig Signal
	t := strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(strings.ToUpper(t), "B:"); ok {
		sig.Batch, t = true, t[len(t)-len(rest):]
	} else if strings.HasPrefix(strings.ToUpper(t), "R:") {
		return sig, fmt.Errorf("%q: R: (reservation end) is not supported; want [B:]SIG[@SECONDS]", s)
	}
	name, lead, hasLead := strings.Cut(t, "@")
	sig.Lead = DefaultSignalLead
	if hasLead {
		d, err := timespec.Parse(lead, timespec.Seconds)
		if err != nil || d > 65535*time.Second {
			return sig, fmt.Errorf("%q: the time before the limit must be 0 to 65535 seconds (or a duration such as 5m)", s)
		}
		sig.Lead = d.Truncate(time.Second)
	}
	up := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")
	if n, err := strconv.Atoi(up); err == nil {
		for k, v := range signals {
			if v == n {
				up = k
			}
		}
	}
	num, ok := signals[up]
	if !ok {
		return sig, fmt.Errorf("%q: want [B:]SIG[@SECONDS] with SIG a signal such as USR1, TERM, INT, HUP or its number", s)
	}
	sig.Name, sig.Number = up, num
	return sig, nil
}
