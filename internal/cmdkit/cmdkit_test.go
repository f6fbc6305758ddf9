package cmdkit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestArgsExactly(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"a"}, ""},
		{nil, "missing a job ID"},
		{[]string{"a", "b"}, `too many arguments: want only a job ID, got ["a" "b"]`},
	}
	for _, tt := range tests {
		err := ArgsExactly(1, "a job ID")(nil, tt.args)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want || !IsUsage(err)):
			t.Errorf("%q: %v; want the usage error %q", tt.args, err, tt.want)
		}
	}
}

func TestArgsAtMostAtLeast(t *testing.T) {
	tests := []struct {
		name  string
		check func(n int, what string) cobra.PositionalArgs
		args  []string
		want  string // "" for no error
	}{
		{"at most, none", ArgsAtMost, nil, ""},
		{"at most, one", ArgsAtMost, []string{"a"}, ""},
		{"at most, two", ArgsAtMost, []string{"a", "b"}, `too many arguments: want at most one server, got ["a" "b"]`},
		{"at least, none", ArgsAtLeast, nil, "missing one server"},
		{"at least, one", ArgsAtLeast, []string{"a"}, ""},
		{"at least, two", ArgsAtLeast, []string{"a", "b"}, ""},
	}
	for _, tt := range tests {
		err := tt.check(1, "one server")(nil, tt.args)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want || !IsUsage(err)):
			t.Errorf("%s: %v; want the usage error %q", tt.name, err, tt.want)
		}
	}
}

func TestArgsSubcommand(t *testing.T) {
	root := &cobra.Command{Use: "corral"}
	nodes := &cobra.Command{Use: "nodes", Run: func(*cobra.Command, []string) {}}
	for _, name := range []string{"uncordon", "cordon", "drain"} {
		nodes.AddCommand(&cobra.Command{Use: name + " NODE", Run: func(*cobra.Command, []string) {}})
	}
	nodes.AddCommand(&cobra.Command{Use: "secret", Hidden: true, Run: func(*cobra.Command, []string) {}})
	root.AddCommand(nodes)
	tests := []struct {
		args []string
		want string // "" for no error
	}{
		{nil, ""},
		{[]string{"cordn"}, `unknown command "cordn" for "corral nodes": want no arguments, or a subcommand: cordon, drain, uncordon`},
		{[]string{"a", "b"}, `unknown command "a" for "corral nodes": want no arguments, or a subcommand: cordon, drain, uncordon`},
	}
	for _, tt := range tests {
		err := ArgsSubcommand(nodes, tt.args)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want || !IsUsage(err)):
			t.Errorf("%q: %v; want the usage error %q", tt.args, err, tt.want)
		}
	}
}

func TestIsUsage(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{Usagef("--n must be at least 1"), true},
		{fmt.Errorf("reading flags: %w", Usage(errors.New("bad"))), true},
		{errors.New("server down"), false},
	}
	for _, tt := range tests {
		if got := IsUsage(tt.err); got != tt.want {
			t.Errorf("IsUsage(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestDurationVar(t *testing.T) {
	tests := []struct {
		arg  string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"2d", 48 * time.Hour},
		{"1:30:00", 90 * time.Minute},
		{"-1m", -time.Minute}, // read, for the flag's own check to refuse
	}
	for _, tt := range tests {
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		var d time.Duration
		DurationVar(fl, &d, "timeout", time.Minute, "")
		if err := fl.Parse([]string{"--timeout", tt.arg}); err != nil || d != tt.want {
			t.Errorf("--timeout %s: %v, %v; want %v", tt.arg, d, err, tt.want)
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	tb := NewTable(&b, "ID", "NAME")
	tb.Row("1", "a\tb")
	tb.Row("22", "")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "ID  NAME\n1   a b\n22  -\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", strings.ReplaceAll(got, " ", "."), strings.ReplaceAll(want, " ", "."))
	}
}
