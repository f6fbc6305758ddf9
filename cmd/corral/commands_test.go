package main

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"

	"github.com/corral-sched/corral/internal/cmdkit"
)

// TestCommandsTable: every entry's name is the name of the command it
// builds, and no two entries share one, so a command line naming a
// command builds the right one alone.
func TestCommandsTable(t *testing.T) {
	c := &cli{}
	seen := map[string]bool{}
	for _, cmd := range commands {
		built := cmd.make(c)
		if built.Name() != cmd.name {
			t.Errorf("commands entry %q builds %q", cmd.name, built.Name())
		}
		if seen[cmd.name] {
			t.Errorf("commands has %q twice", cmd.name)
		}
		seen[cmd.name] = true
	}
}

func TestCommandName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		ok   bool
	}{
		{nil, "", false},
		{[]string{"submit", "--gpus", "1", "--", "true"}, "submit", true},
		{[]string{"--server", "http://a:7450", "queue"}, "queue", true},
		{[]string{"--server=http://a:7450", "-o", "json", "jobs"}, "jobs", true},
		{[]string{"-ojson", "--token", "t", "show", "x"}, "show", true},
		{[]string{"--help"}, "", false},
		{[]string{"-h", "submit"}, "", false},
		{[]string{"--", "submit"}, "", false},
		{[]string{"--server"}, "", false},
		{[]string{"help", "submit"}, "help", true},
	} {
		got, ok := commandName(tc.args)
		if got != tc.want || ok != tc.ok {
			t.Errorf("commandName(%q) = %q, %v; want %q, %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

// TestLazyTreeKeepsHelpAndSuggestions: a command line naming one command
// builds it alone, and one that names none still sees every command (the
// help lists them, a typo gets its suggestion).
func TestLazyTreeKeepsHelpAndSuggestions(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runWith([]string{"--help"}, &out, &errb); code != exitOK {
		t.Fatalf("corral --help: exit %d: %s", code, errb.String())
	}
	for _, cmd := range commands {
		if cmd.name == "shim" {
			continue // hidden
		}
		if !bytes.Contains(out.Bytes(), []byte("  "+cmd.name+" ")) {
			t.Errorf("corral --help does not list %q", cmd.name)
		}
	}
	out.Reset()
	errb.Reset()
	if code := runWith([]string{"submt"}, &out, &errb); code != exitUsage {
		t.Fatalf("corral submt: exit %d, want %d", code, exitUsage)
	}
	if !bytes.Contains(errb.Bytes(), []byte("submit")) {
		t.Errorf("corral submt suggests no submit: %s", errb.String())
	}
	c := &cli{}
	if got := c.subcommands([]string{"--server", "x", "queue", "--all"}); len(got) != 1 || got[0].Name() != "queue" {
		t.Errorf("subcommands(queue) built %d commands", len(got))
	}
}

// TestArgsConvention: every command of this package checks its positional
// arguments as commands.go says: a runnable command has Args, whose error
// for a wrong count is a usage error (not one of cobra's own validators),
// and a command that only groups subcommands has none.
func TestArgsConvention(t *testing.T) {
	elsewhere := map[string]bool{"up": true, "server": true, "store": true, "agent": true, "shim": true, "bench": true}
	root := (&cli{}).newRootCmd(nil)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		path := cmd.CommandPath()
		switch {
		case !cmd.Runnable():
			if cmd.Args != nil {
				t.Errorf("%s only groups subcommands but has Args", path)
			}
		case cmd.Args == nil:
			t.Errorf("%s has no Args", path)
		default:
			for _, args := range [][]string{nil, {"a1", "a2", "a3", "a4", "a5", "a6"}} {
				if err := cmd.Args(cmd, args); err != nil && !cmdkit.IsUsage(err) {
					t.Errorf("%s %q: %v is not a usage error (a cobra validator?)", path, args, err)
				}
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	for _, cmd := range root.Commands() {
		if !elsewhere[cmd.Name()] && cmd.Name() != "help" && cmd.Name() != "completion" {
			walk(cmd)
		}
	}
}
