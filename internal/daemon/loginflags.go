package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/auth"
	"github.com/corral-sched/corral/internal/cmdkit"
	"github.com/corral-sched/corral/internal/server"
)

// loginFlags are the sign-in flags of `corral up` and `corral server`
// (docs/team.md, "Signing in").
type loginFlags struct {
	fs         *pflag.FlagSet
	socket     string
	ttl        time.Duration
	group      string
	allowRoot  bool
	fromAgents bool
}

func (f *loginFlags) register(fl *pflag.FlagSet) {
	f.fs = fl
	fl.StringVar(&f.socket, "login-socket", "", "the Unix socket (mode 0666) on which local users sign in as their own account with corral login; \"\" (--login-socket=\"\") turns it off (default "+auth.LoginSocketPath+" as root, else <data-dir>/login.sock)")
	fl.DurationVar(&f.ttl, "login-token-ttl", auth.DefaultLoginTTL, "how long a token made by corral login (socket, dashboard code or invite) works")
	fl.StringVar(&f.group, "login-group", "", "sign in through the login socket only the members of this Unix group (default: every local account but root)")
	fl.BoolVar(&f.allowRoot, "login-allow-root", false, "let root sign in through the login socket (root has the admin token anyway)")
	fl.BoolVar(&f.fromAgents, "login-from-agents", false, "let agents sign in their nodes' local users (corral login on a node that runs only corral agent); whoever holds the join token can then get a user token for any name but root")
}

func (f *loginFlags) check() error {
	if f.ttl <= 0 {
		return cmdkit.Usagef("--login-token-ttl %s: must be positive", f.ttl)
	}
	return nil
}

// option is the server's sign-in configuration.
func (f *loginFlags) option() server.Option {
	host, _ := os.Hostname()
	return server.WithLogin(server.LoginConfig{TTL: f.ttl, FromAgents: f.fromAgents, Host: host})
}

// path is the login socket's path: the flag's, else the default; "" off.
func (f *loginFlags) path(dataDir string) (path string, explicit bool) {
	if f.fs != nil && f.fs.Changed("login-socket") {
		return f.socket, true
	}
	if os.Geteuid() == 0 {
		return auth.LoginSocketPath, false
	}
	return filepath.Join(dataDir, "login.sock"), false
}

// serve serves the login socket of api until ctx ends, and says where in
// the banner. A socket that cannot be served is an error when the flag
// named it, a warning for the default (another server on this machine
// may have it).
func (f *loginFlags) serve(ctx context.Context, api *server.Server, dataDir, serverURL string, banner io.Writer, logger *slog.Logger) error {
	path, explicit := f.path(dataDir)
	if path == "" {
		return nil
	}
	ls, err := api.LoginSocket(auth.LocalPolicy{Group: f.group, AllowRoot: f.allowRoot}, serverURL)
	if err == nil {
		var ln net.Listener
		if ln, err = auth.ListenLoginSocket(path); err == nil {
			go func() {
				if err := ls.Serve(ctx, ln); err != nil {
					logger.Error("login socket stopped", "err", err, "path", path)
				}
			}()
		}
	}
	if err != nil {
		if explicit {
			return fmt.Errorf("--login-socket %s: %w", path, err)
		}
		logger.Warn("no login socket: corral login on this machine will not work (set --login-socket)", "err", err)
		return nil
	}
	who := "every local account but root"
	if f.group != "" {
		who = "the members of group " + f.group
	}
	fmt.Fprintf(banner, "  sign in: %s login (login socket %s, for %s)\n", cmdkit.SelfName(), path, who)
	return nil
}
