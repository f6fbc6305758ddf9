package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpDump writes, for every command, its --help and what it answers to
// a wrong command line (no arguments, six arguments; stdout, stderr and
// exit code) into the file $CORRAL_HELP_DUMP; without it the test is
// skipped. A refactoring that must not change the command line dumps
// before and after and diffs the two:
//
//	CORRAL_HELP_DUMP=/tmp/before.txt go test ./cmd/corral -run TestHelpDump -count=1
//
// The daemons, the bench tools and the commands that sign in, prompt or
// run something are dumped for --help only; shim (a flag package program)
// not at all.
func TestHelpDump(t *testing.T) {
	out := os.Getenv("CORRAL_HELP_DUMP")
	if out == "" {
		t.Skip("set CORRAL_HELP_DUMP to a file to dump every command's help into")
	}
	t.Setenv("CORRAL_SERVER", "")
	t.Setenv("CORRAL_TOKEN", "")
	t.Setenv("CORRAL_CONFIG", t.TempDir()+"/client.json")
	helpOnly := map[string]bool{
		"up": true, "server": true, "store": true, "agent": true, "bench": true, "sim": true,
		"login": true, "logout": true, "user": true, "submit": true, "run": true, "shell": true, "alloc": true, "notebook": true,
	}
	var paths [][]string
	var walk func(cmd *cobra.Command, p []string)
	walk = func(cmd *cobra.Command, p []string) {
		if len(p) > 0 && p[0] == "shim" {
			return
		}
		paths = append(paths, p)
		for _, s := range cmd.Commands() {
			walk(s, append(append([]string{}, p...), s.Name()))
		}
	}
	walk((&cli{}).newRootCmd(nil), nil)
	var buf bytes.Buffer
	try := func(title string, args ...string) {
		var o, e bytes.Buffer
		code := runWith(args, &o, &e)
		fmt.Fprintf(&buf, "=== corral %s (exit %d)\n%s--- stderr\n%s", title, code, o.String(), e.String())
	}
	for _, p := range paths {
		name := strings.Join(p, " ")
		try(name+" --help", append(p[:len(p):len(p)], "--help")...)
		if len(p) == 0 || helpOnly[p[0]] {
			continue
		}
		unreachable := append([]string{"--server", "http://127.0.0.1:1"}, p...)
		try(name+" (no arguments)", unreachable...)
		try(name+" a1..a6", append(unreachable, "a1", "a2", "a3", "a4", "a5", "a6")...)
	}
	fmt.Fprintf(&buf, "%d commands\n", len(paths))
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commands' help written to %s", len(paths), out)
}
