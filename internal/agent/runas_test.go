package agent

import (
	"errors"
	"os/user"
	"reflect"
	"strings"
	"testing"
)

func TestJobCredential(t *testing.T) {
	accounts := map[string]*user.User{
		"ana":    {Username: "ana", Uid: "1001", Gid: "1001"},
		"root":   {Username: "root", Uid: "0", Gid: "0"},
		"nobody": {Username: "nobody", Uid: "65534", Gid: "65534"},
	}
	lookup := func(name string) (*user.User, error) {
		if u, ok := accounts[name]; ok {
			return u, nil
		}
		return nil, errors.New("unknown user")
	}
	groups := func(*user.User) ([]string, error) { return []string{"1001", "27"}, nil }
	ana := []string{"--uid", "1001", "--gid", "1001", "--groups", "1001,27"}
	nobody := []string{"--uid", "65534", "--gid", "65534", "--groups", "1001,27"}
	tests := []struct {
		name, owner, runAs, fallback string
		euid                         int
		want                         []string // shim args; nil: the agent's own account
		fails                        string   // what the error says; "": none
	}{
		{"root agent, known user", "ana", RunAsUser, "", 0, ana, ""},
		{"root agent, unknown user: fails, naming what to configure", "bob", RunAsUser, "", 0, nil, "--run-as-fallback"},
		{"unknown user, the message names --run-as agent", "bob", RunAsUser, "", 0, nil, "--run-as agent"},
		{"unknown user, the message says create the account", "bob", RunAsUser, "", 0, nil, "create the account"},
		{"root agent, unknown user, fallback", "bob", RunAsUser, "nobody", 0, nobody, ""},
		{"root agent, known user, fallback unused", "ana", RunAsUser, "nobody", 0, ana, ""},
		{"fallback root is refused", "bob", RunAsUser, "root", 0, nil, "root"},
		{"fallback without an account", "bob", RunAsUser, "ghost", 0, nil, "ghost"},
		{"strict is user", "bob", RunAsStrict, "", 0, nil, "--run-as-fallback"},
		{"strict with fallback", "bob", RunAsStrict, "nobody", 0, nobody, ""},
		{"root agent, known user, strict", "ana", RunAsStrict, "", 0, ana, ""},
		{"root agent, root user", "root", RunAsUser, "", 0, nil, "root"},
		{"root agent, root user, fallback does not apply", "root", RunAsUser, "nobody", 0, nil, "root"},
		{"unset mode acts as user", "root", "", "", 0, nil, "root"},
		{"unset mode, unknown user", "bob", "", "", 0, nil, "no Unix account"},
		{"agent mode", "bob", RunAsAgent, "", 0, nil, ""},
		{"agent mode, root user", "root", RunAsAgent, "", 0, nil, ""},
		{"agent not root", "ana", RunAsUser, "", 1000, nil, ""},
		{"root agent, no owner", "", RunAsUser, "", 0, nil, "no Unix account"},
	}
	for _, tt := range tests {
		c, err := jobCredential(tt.owner, tt.euid, tt.runAs, tt.fallback, lookup, groups)
		failed := err != nil && tt.fails != "" && strings.Contains(err.Error(), tt.fails)
		if (err != nil) != (tt.fails != "") || (err != nil && !failed) || !reflect.DeepEqual(c.shimArgs(), tt.want) {
			t.Errorf("%s: %v %v, want %v (error saying %q)", tt.name, c.shimArgs(), err, tt.want, tt.fails)
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

func TestCheckRunAs(t *testing.T) {
	tests := []struct {
		runAs, fallback string
		ok              bool
	}{
		{"", "", true}, {RunAsUser, "", true}, {RunAsStrict, "", true}, {RunAsAgent, "", true},
		{"sometimes", "", false},
		{RunAsUser, "root", false},
		{RunAsUser, "no-such-account-here", false},
	}
	if _, err := user.Lookup("nobody"); err == nil {
		tests = append(tests, struct {
			runAs, fallback string
			ok              bool
		}{RunAsUser, "nobody", true})
	}
	for _, tt := range tests {
		if err := CheckRunAs(tt.runAs, tt.fallback); (err == nil) != tt.ok {
			t.Errorf("CheckRunAs(%q, %q) = %v, want ok %v", tt.runAs, tt.fallback, err, tt.ok)
		}
	}
}
