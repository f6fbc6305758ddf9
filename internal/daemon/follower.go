package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"

	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/server"
	"github.com/corral-sched/corral/internal/store"
)

// handlerSwitch is the HTTP handler of a server whose role changes under
// one listener: a follower's API until it leads, then the leader's.
type handlerSwitch struct{ h atomic.Pointer[http.Handler] }

func (s *handlerSwitch) set(h http.Handler) { s.h.Store(&h) }

func (s *handlerSwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// advertiseURL is the base URL other servers send clients to while this
// one leads: --advertise, else the scheme and the address it listens on
// (a wildcard address is replaced by the host's name).
func (f *controlFlags) advertiseURL(addr net.Addr) (string, error) {
	if f.advertise != "" {
		u, err := url.Parse(f.advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", cmdkit.Usagef("--advertise %q: want a base URL such as http://head-1:7450", f.advertise)
		}
		return u.Scheme + "://" + u.Host, nil
	}
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "", fmt.Errorf("--listen %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("--advertise is not set and the host name is unknown: %w", err)
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// follow makes a server on PostgreSQL serve as a follower until it leads:
// it records its address for the others (store.SetServerAddress) and sets
// sw to the follower's API, which answers /healthz, serves job reads from
// the database and sends everything else to the leader (307).
func follow(ctx context.Context, st *store.Store, dataDir, self string, sw *handlerSwitch, logger *slog.Logger) error {
	if err := st.SetServerAddress(ctx, leaseHolder(dataDir), self); err != nil {
		return err
	}
	authSvc, err := auth.New(ctx, st, nil)
	if err != nil {
		return err
	}
	sw.set(server.NewFollower(server.FollowerConfig{Store: st, Auth: authSvc, Self: self, Logger: logger}))
	return nil
}
