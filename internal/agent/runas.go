package agent

import (
	"fmt"
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
//     the node as that account (its uid, primary gid and groups), and a
//     job whose user has no account as the agent's own account. A job
//     whose user is root (uid 0) fails to start: root runs a job as root
//     only when told to (RunAsAgent).
//   - RunAsStrict is RunAsUser, except that a job whose user has no
//     account fails to start (reason start_failed, saying why).
//   - RunAsAgent runs every job as the agent's own account, root
//     included (a single-user machine).
const (
	RunAsUser   = "user"
	RunAsStrict = "strict"
	RunAsAgent  = "agent"
)

// credential is the account a job runs under; nil: the agent's own.
type credential struct {
	uid, gid uint32
	groups   []uint32
}

// lookupFunc finds a Unix account by name (user.Lookup, or a fake).
type lookupFunc func(name string) (*user.User, error)

// groupsFunc lists an account's group ids (u.GroupIds, or a fake).
type groupsFunc func(u *user.User) ([]string, error)

// jobCredential decides whose account a job of owner runs under, for an
// agent with effective uid euid in mode runAs.
func jobCredential(owner string, euid int, runAs string, lookup lookupFunc, groups groupsFunc) (*credential, error) {
	if runAs == RunAsAgent || euid != 0 || owner == "" {
		return nil, nil
	}
	u, err := lookup(owner)
	if err != nil {
		if runAs != RunAsStrict {
			return nil, nil
		}
		return nil, fmt.Errorf("job user %q has no Unix account on this node, and the agent runs jobs only as their owner's account (--run-as strict): create the account, or start the agent with --run-as user", owner)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("job user %q: account ids %s:%s are not numbers", owner, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("job user %q is root on this node; an agent runs jobs as root only when started with --run-as agent", owner)
	}
	c := &credential{uid: uint32(uid), gid: uint32(gid)}
	if gs, err := groups(u); err == nil {
		for _, g := range gs {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				c.groups = append(c.groups, uint32(n))
			}
		}
	}
	return c, nil
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
