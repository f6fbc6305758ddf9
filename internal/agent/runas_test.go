package agent

import (
	"errors"
	"os/user"
	"reflect"
	"testing"
)

func TestJobCredential(t *testing.T) {
	accounts := map[string]*user.User{
		"ana":  {Username: "ana", Uid: "1001", Gid: "1001"},
		"root": {Username: "root", Uid: "0", Gid: "0"},
	}
	lookup := func(name string) (*user.User, error) {
		if u, ok := accounts[name]; ok {
			return u, nil
		}
		return nil, errors.New("unknown user")
	}
	groups := func(*user.User) ([]string, error) { return []string{"1001", "27"}, nil }
	tests := []struct {
		name, owner, runAs string
		euid               int
		want               []string // shim args; nil: the agent's own account
		fails              bool
	}{
		{"root agent, known user", "ana", RunAsUser, 0, []string{"--uid", "1001", "--gid", "1001", "--groups", "1001,27"}, false},
		{"root agent, unknown user", "bob", RunAsUser, 0, nil, false},
		{"root agent, unknown user, strict", "bob", RunAsStrict, 0, nil, true},
		{"root agent, known user, strict", "ana", RunAsStrict, 0, []string{"--uid", "1001", "--gid", "1001", "--groups", "1001,27"}, false},
		{"root agent, root user", "root", RunAsUser, 0, nil, true},
		{"root agent, root user, strict", "root", RunAsStrict, 0, nil, true},
		{"unset mode acts as user", "root", "", 0, nil, true},
		{"agent mode", "bob", RunAsAgent, 0, nil, false},
		{"agent not root", "ana", RunAsUser, 1000, nil, false},
		{"no owner", "", RunAsUser, 0, nil, false},
	}
	for _, tt := range tests {
		c, err := jobCredential(tt.owner, tt.euid, tt.runAs, lookup, groups)
		if (err != nil) != tt.fails || !reflect.DeepEqual(c.shimArgs(), tt.want) {
			t.Errorf("%s: %v %v, want %v (fails %v)", tt.name, c.shimArgs(), err, tt.want, tt.fails)
		}
	}
	if c, err := parseCredential(1001, 1001, "1001,27"); err != nil || c.Uid != 1001 || !reflect.DeepEqual(c.Groups, []uint32{1001, 27}) {
		t.Errorf("parseCredential: %+v %v", c, err)
	}
	for _, bad := range [][2]int{{0, 0}, {5, -1}} {
		if _, err := parseCredential(bad[0], bad[1], ""); err == nil {
			t.Errorf("parseCredential(%v) accepted", bad)
		}
	}
}
