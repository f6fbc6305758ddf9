package daemon

import (
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/agent"
	"github.com/corral-sched/corral/internal/auth"
)

// agentLoginFlags are the login socket flags of `corral agent`, named as
// the server's (loginflags.go): the agent serves the socket and asks its
// server for the tokens (POST /auth/login/node, which needs the server's
// --login-from-agents). docs/team.md, "Nodes that run only corral agent".
type agentLoginFlags struct {
	f loginFlags // only its socket, group and allowRoot
}

func (a *agentLoginFlags) register(fl *pflag.FlagSet) {
	a.f.fs = fl
	fl.StringVar(&a.f.socket, "login-socket", "", "the Unix socket (mode 0666) on which this node's users sign in as their own account with corral login; the agent asks its server, which must run with --login-from-agents; \"\" (--login-socket=\"\") turns it off (default "+auth.LoginSocketPath+" as root, else <data-dir>/login.sock)")
	fl.StringVar(&a.f.group, "login-group", "", "sign in through the login socket only the members of this Unix group (default: every local account but root)")
	fl.BoolVar(&a.f.allowRoot, "login-allow-root", false, "let root sign in through the login socket (the server still refuses root through an agent)")
}

// apply sets the agent's login socket; dataDir is its data directory.
func (a *agentLoginFlags) apply(cfg *agent.Config, dataDir string) {
	path, explicit := a.f.path(dataDir)
	cfg.Login = agent.LoginSocketConfig{Path: path, Explicit: explicit,
		Policy: auth.LocalPolicy{Group: a.f.group, AllowRoot: a.f.allowRoot}}
}
