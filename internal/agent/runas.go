package agent

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// Whose account a job runs under (Config.RunAs, --run-as). An agent that
// is not root cannot switch users: every job runs as the agent's own
// account, whatever the mode. An agent running as root:
//
//   - RunAsUser (the default) runs a job whose user is a Unix account on
//     the node as that account (its uid, primary gid and groups). A job
//     whose user has no account runs as the fallback account when one is
//     configured (Config.RunAsFallback, --run-as-fallback, e.g. nobody),
//     and otherwise fails to start (reason start_failed, with a message
//     naming what to configure). A job whose user is root (uid 0) fails
//     to start: root runs a job as root only when told to (RunAsAgent).
//   - RunAsStrict is a synonym of RunAsUser, kept for old command lines.
//   - RunAsAgent runs every job as the agent's own account, root
//     included (a single-user machine).
const (
	RunAsUser   = "user"
	RunAsStrict = "strict"
	RunAsAgent  = "agent"
)

// credential is the account a job runs under; nil: the agent's own.
type credential struct {
	uid, gid   uint32
	groups     []uint32
	name, home string // the account's name and home directory: the job's USER, LOGNAME and HOME
	shell      string // its login shell, the job's SHELL (loginShell, jobenv.go); "": /bin/sh
}

// lookupFunc finds a Unix account by name (user.Lookup, or a fake).
type lookupFunc func(name string) (*user.User, error)

// groupsFunc lists an account's group ids (u.GroupIds, or a fake).
type groupsFunc func(u *user.User) ([]string, error)

// jobCredential decides whose account a job of owner runs under, for an
// agent with effective uid euid in mode runAs; fallback (may be empty) is
// the account of owners without one. nil: the agent's own account, which
// a root agent uses only in RunAsAgent mode.
func jobCredential(owner string, euid int, runAs, fallback string, lookup lookupFunc, groups groupsFunc) (*credential, error) {
	if runAs == RunAsAgent || euid != 0 {
		return nil, nil
	}
	u, err := lookup(owner)
	if err != nil || owner == "" {
		if fallback == "" {
			return nil, fmt.Errorf("job user %q has no Unix account on this node, and this root agent never runs a job as root unless told to: "+
				"create the account, or start the agent with --run-as-fallback ACCOUNT (e.g. nobody) to run such jobs as that account, "+
				"or with --run-as agent to run every job as the agent's own account (a single-user machine)", owner)
		}
		fu, ferr := lookup(fallback)
		if ferr != nil {
			return nil, fmt.Errorf("job user %q has no Unix account on this node, and the fallback account %q (--run-as-fallback) has none either: %w", owner, fallback, ferr)
		}
		c, err := accountCredential(fu, groups)
		if err != nil {
			return nil, fmt.Errorf("--run-as-fallback %s: %w", fallback, err)
		}
		return c, nil
	}
	c, err := accountCredential(u, groups)
	if err != nil {
		return nil, fmt.Errorf("job user %q: %w", owner, err)
	}
	return c, nil
}

// accountCredential is the credential of account u: its uid, primary gid
// and groups. Root (uid 0) is refused: an agent runs jobs as root only in
// RunAsAgent mode.
func accountCredential(u *user.User, groups groupsFunc) (*credential, error) {
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("account ids %s:%s are not numbers", u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("account %q is root on this node; an agent runs jobs as root only when started with --run-as agent", u.Username)
	}
	c := &credential{uid: uint32(uid), gid: uint32(gid), name: u.Username, home: u.HomeDir}
	if gs, err := groups(u); err == nil {
		for _, g := range gs {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				c.groups = append(c.groups, uint32(n))
			}
		}
	}
	return c, nil
}

// CheckRunAs checks an agent's --run-as and --run-as-fallback: the mode
// is one of RunAsUser, RunAsStrict, RunAsAgent (or empty: RunAsUser), and
// a fallback, when set, is an account of this node that is not root.
func CheckRunAs(runAs, fallback string) error {
	switch runAs {
	case "", RunAsUser, RunAsStrict, RunAsAgent:
	default:
		return fmt.Errorf("--run-as %q (or $CORRAL_RUN_AS): want %s, %s or %s", runAs, RunAsUser, RunAsStrict, RunAsAgent)
	}
	if fallback == "" {
		return nil
	}
	u, err := systemLookup(fallback)
	if err != nil {
		return fmt.Errorf("--run-as-fallback %q (or $CORRAL_RUN_AS_FALLBACK): no such account on this node: %w", fallback, err)
	}
	if _, err := accountCredential(u, func(*user.User) ([]string, error) { return nil, nil }); err != nil {
		return fmt.Errorf("--run-as-fallback %q (or $CORRAL_RUN_AS_FALLBACK): %w", fallback, err)
	}
	return nil
}

// CheckOwner reports why this agent (its own effective uid, in mode
// runAs with fallback) could not run owner's jobs; nil when it could.
// corral up uses it to warn at start that its own user's jobs would fail.
func CheckOwner(owner, runAs, fallback string) error {
	_, err := jobCredential(owner, os.Geteuid(), runAs, fallback, systemLookup, func(*user.User) ([]string, error) { return nil, nil })
	return err
}

// shimArgs are the shim's flags for c.
func (c *credential) shimArgs() []string {
	if c == nil {
		return nil
	}
	gs := make([]string, len(c.groups))
	for i, g := range c.groups {
		gs[i] = strconv.FormatUint(uint64(g), 10)
	}
	return []string{"--uid", strconv.FormatUint(uint64(c.uid), 10), "--gid", strconv.FormatUint(uint64(c.gid), 10), "--groups", strings.Join(gs, ",")}
}

// parseCredential reads the shim's --uid, --gid and --groups; uid < 0:
// none.
func parseCredential(uid, gid int, groups string) (*syscall.Credential, error) {
	if uid < 0 {
		return nil, nil
	}
	if uid == 0 || gid < 0 {
		return nil, fmt.Errorf("--uid %d --gid %d: not an account a job may run as", uid, gid)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for _, g := range strings.Split(groups, ",") {
		if g == "" {
			continue
		}
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--groups %q: %w", groups, err)
		}
		c.Groups = append(c.Groups, uint32(n))
	}
	return c, nil
}

// systemLookup and systemGroups are the node's accounts.
func systemLookup(name string) (*user.User, error) { return user.Lookup(name) }
func systemGroups(u *user.User) ([]string, error)  { return u.GroupIds() }
