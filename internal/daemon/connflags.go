package daemon

import (
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/server"
)

// connFlags are the API listener's connection limits (corral up and
// corral server): --read-timeout, --write-timeout, --idle-timeout and
// --max-unauthenticated-conns (server.ConnLimits).
type connFlags struct{ server.ConnLimits }

func (f *connFlags) register(fl *pflag.FlagSet) {
	d := server.DefaultConnLimits()
	f.ReadHeaderTimeout = d.ReadHeaderTimeout
	fl.DurationVar(&f.ReadTimeout, "read-timeout", d.ReadTimeout, "the most time a request, headers and body, may take to arrive (0: no bound)")
	fl.DurationVar(&f.WriteTimeout, "write-timeout", d.WriteTimeout, "the most time an answer may take to be written; for a caller with a valid token, the most each write of it may stall (streams, long polls) (0: no bound)")
	fl.DurationVar(&f.IdleTimeout, "idle-timeout", d.IdleTimeout, "how long a keep-alive connection may wait between requests (0: no bound)")
	fl.IntVar(&f.MaxUnauthenticated, "max-unauthenticated-conns", d.MaxUnauthenticated, "the most connections open that have not yet presented a valid token; past it the oldest of them is closed (0: no cap)")
}

// limits checks the flags.
func (f *connFlags) limits() (server.ConnLimits, error) {
	for _, c := range []struct {
		name string
		v    int64
	}{{"--read-timeout", int64(f.ReadTimeout)}, {"--write-timeout", int64(f.WriteTimeout)}, {"--idle-timeout", int64(f.IdleTimeout)}, {"--max-unauthenticated-conns", int64(f.MaxUnauthenticated)}} {
		if c.v < 0 {
			return server.ConnLimits{}, cmdkit.Usagef("%s: must not be negative (0: no bound)", c.name)
		}
	}
	return f.ConnLimits, nil
}
