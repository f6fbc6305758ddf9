package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/cmdkit"
)

// configTestFlags is a flag set of every kind of value the daemons have.
type configTestFlags struct {
	fs       *pflag.FlagSet
	on       bool
	ttl      time.Duration
	labels   []string
	n        int
	size     byteSize
	name     string
	share    percent
	fraction float64
}

func newConfigTestFlags() *configTestFlags {
	f := &configTestFlags{fs: pflag.NewFlagSet("test", pflag.ContinueOnError)}
	f.fs.BoolVar(&f.on, "login-from-agents", false, "")
	cmdkit.DurationVar(f.fs, &f.ttl, "node-ttl", 30*time.Second, "")
	f.fs.StringArrayVar(&f.labels, "label", nil, "")
	f.fs.IntVar(&f.n, "max-gpus-per-node", 64, "")
	f.size = 1 << 30
	f.fs.Var(&f.size, "max-log-size", "")
	f.fs.StringVar(&f.name, "listen", "127.0.0.1:7450", "")
	f.fs.Var(&f.share, "min-free-disk", "")
	f.fs.Float64Var(&f.fraction, "default-cpus-per-gpu", 0, "")
	return f
}

func anyFlag(string) bool { return true }

func TestConfigFileTypes(t *testing.T) {
	for name, tc := range map[string]struct {
		file  string
		check func(*configTestFlags) bool
	}{
		"bool true":            {`{"login-from-agents": true}`, func(f *configTestFlags) bool { return f.on }},
		"bool as a string":     {`{"login-from-agents": "true"}`, func(f *configTestFlags) bool { return f.on }},
		"duration":             {`{"node-ttl": "45s"}`, func(f *configTestFlags) bool { return f.ttl == 45*time.Second }},
		"duration in days":     {`{"node-ttl": "2d"}`, func(f *configTestFlags) bool { return f.ttl == 48*time.Hour }},
		"string array":         {`{"label": ["rack=r2", "ib=yes"]}`, func(f *configTestFlags) bool { return slices.Equal(f.labels, []string{"rack=r2", "ib=yes"}) }},
		"string array, scalar": {`{"label": "rack=r2"}`, func(f *configTestFlags) bool { return slices.Equal(f.labels, []string{"rack=r2"}) }},
		"int":                  {`{"max-gpus-per-node": 16}`, func(f *configTestFlags) bool { return f.n == 16 }},
		"size":                 {`{"max-log-size": "512MiB"}`, func(f *configTestFlags) bool { return f.size == 512<<20 }},
		"size in bytes":        {`{"max-log-size": 4096}`, func(f *configTestFlags) bool { return f.size == 4096 }},
		"string":               {`{"listen": "0.0.0.0:7450"}`, func(f *configTestFlags) bool { return f.name == "0.0.0.0:7450" }},
		"percent":              {`{"min-free-disk": "10%"}`, func(f *configTestFlags) bool { return f.share == 10 }},
		"float":                {`{"default-cpus-per-gpu": 1.5}`, func(f *configTestFlags) bool { return f.fraction == 1.5 }},
		"comments":             {`{"//": "a comment", "// tls": ["any", 1], "listen": ":1"}`, func(f *configTestFlags) bool { return f.name == ":1" }},
		"empty object":         {`{}`, func(f *configTestFlags) bool { return f.name == "127.0.0.1:7450" && !f.fs.Changed("listen") }},
	} {
		t.Run(name, func(t *testing.T) {
			f := newConfigTestFlags()
			if err := applyConfig(f.fs, anyFlag, "c.json", []byte(tc.file)); err != nil {
				t.Fatal(err)
			}
			if !tc.check(f) {
				t.Errorf("%s: flags after the file: %+v", tc.file, *f)
			}
		})
	}
}

// TestConfigFilePrecedence: a flag on the command line wins over the file
// (a repeatable flag's whole list); the file's other keys still apply, and
// are then Changed, as if given on the command line.
func TestConfigFilePrecedence(t *testing.T) {
	f := newConfigTestFlags()
	if err := f.fs.Parse([]string{"--node-ttl", "1m", "--label", "cli=1"}); err != nil {
		t.Fatal(err)
	}
	file := `{"node-ttl": "5s", "label": ["a=1", "b=2"], "max-gpus-per-node": 8}`
	if err := applyConfig(f.fs, anyFlag, "c.json", []byte(file)); err != nil {
		t.Fatal(err)
	}
	if f.ttl != time.Minute || !slices.Equal(f.labels, []string{"cli=1"}) || f.n != 8 || !f.fs.Changed("max-gpus-per-node") {
		t.Errorf("node-ttl %s labels %q max-gpus-per-node %d (changed %v); want 1m0s [cli=1] 8 (true)", f.ttl, f.labels, f.n, f.fs.Changed("max-gpus-per-node"))
	}
}

func TestConfigFileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file     string
		settable func(string) bool
		want     []string // in the message
	}{
		"unknown key":          {"{\n  \"listen\": \":1\",\n  \"lissen\": \":2\"\n}", anyFlag, []string{"c.json, line 3", `"lissen" is not a flag of this command`}},
		"not settable":         {`{"listen": ":1"}`, func(n string) bool { return n != "listen" }, []string{`"listen" is not a flag`}},
		"bad duration":         {"{\"node-ttl\":\n \"soon\"}", anyFlag, []string{"line 1", `"soon" is not a valid value of --node-ttl`, "a duration such as"}},
		"bad bool":             {`{"login-from-agents": "maybe"}`, anyFlag, []string{"--login-from-agents", "true or false"}},
		"bad int":              {`{"max-gpus-per-node": 1.5}`, anyFlag, []string{"1.5 is not a valid value of --max-gpus-per-node", "a whole number"}},
		"bad size":             {`{"max-log-size": "lots"}`, anyFlag, []string{"--max-log-size", `a size such as "512MiB"`}},
		"list for one value":   {`{"listen": [":1", ":2"]}`, anyFlag, []string{`"listen" takes one value, not a list`, "a string"}},
		"empty list":           {`{"label": []}`, anyFlag, []string{"an empty list sets nothing"}},
		"null":                 {`{"listen": null}`, anyFlag, []string{"null is no value"}},
		"object value":         {`{"listen": {"a": 1}}`, anyFlag, []string{"want a string, number or boolean"}},
		"nested list":          {`{"label": [["a"]]}`, anyFlag, []string{"a list element"}},
		"twice":                {"{\"listen\": \":1\",\n\"listen\": \":2\"}", anyFlag, []string{"line 2", `"listen" is set twice (first on line 1)`}},
		"not an object":        {`["listen", ":1"]`, anyFlag, []string{"want a JSON object of flags"}},
		"syntax error, line 3": {"{\n\"listen\": \":1\",\n\"node-ttl\" \"5s\"\n}", anyFlag, []string{"c.json, line 3", "not valid JSON"}},
		"cut short":            {`{"listen": ":1",`, anyFlag, []string{"not valid JSON"}},
		"trailing data":        {`{"listen": ":1"} {}`, anyFlag, []string{"more after the JSON object"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newConfigTestFlags()
			err := applyConfig(f.fs, tc.settable, "c.json", []byte(tc.file))
			if err == nil {
				t.Fatalf("%s: no error", tc.file)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s:\n%v\nwant %q in it", tc.file, err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "config file c.json") {
				t.Errorf("the error does not start with the file's name: %v", err)
			}
		})
	}
}

// TestConfigFileChangesNothingOnUnknownKey: a file with an unknown key
// sets none of its other keys.
func TestConfigFileChangesNothingOnUnknownKey(t *testing.T) {
	f := newConfigTestFlags()
	if err := applyConfig(f.fs, anyFlag, "c.json", []byte(`{"listen": ":1", "nope": 1}`)); err == nil {
		t.Fatal("no error")
	}
	if f.fs.Changed("listen") || f.name != "127.0.0.1:7450" {
		t.Errorf("listen is %q after a refused file", f.name)
	}
}

// daemonCmds are the commands that take --config, with their RunE
// replaced so that a test sees the flags they would run with.
func daemonCmds() map[string]func() *cobra.Command {
	return map[string]func() *cobra.Command{"up": NewUpCmd, "server": NewServerCmd, "agent": NewAgentCmd}
}

// runConfigured runs cmd with args up to its RunE, which it replaces.
func runConfigured(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	cmd.RunE = func(*cobra.Command, []string) error { return nil }
	cmd.SetArgs(args)
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return cmd.Execute()
}

// TestConfigFileEveryFlag: each daemon's every flag is settable from the
// file, with its default value as written by --help.
func TestConfigFileEveryFlag(t *testing.T) {
	for name, mk := range daemonCmds() {
		t.Run(name, func(t *testing.T) {
			settings := map[string]any{}
			mk().LocalFlags().VisitAll(func(f *pflag.Flag) {
				switch {
				case f.Name == "help" || f.Name == configFlag:
				case repeatable(f):
					settings[f.Name] = []string{"k=v"}
				default:
					settings[f.Name] = f.DefValue
				}
			})
			if len(settings) < 10 {
				t.Fatalf("only %d flags", len(settings))
			}
			path := filepath.Join(t.TempDir(), "c.json")
			b, _ := json.Marshal(settings)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := mk()
			if err := runConfigured(t, cmd, "--config", path); err != nil {
				t.Fatal(err)
			}
			for k := range settings {
				if !cmd.Flags().Changed(k) {
					t.Errorf("--%s is not set by the file", k)
				}
			}
		})
	}
}

// TestConfigFileCommand: through a real command: the file sets, the
// command line wins, a bad file is a usage error naming it.
func TestConfigFileCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "agent.json")
	os.WriteFile(good, []byte(`{"server": "https://head:7450", "interval": "2s", "label": ["rack=r2"], "login-group": "corral"}`), 0o600)
	cmd := NewAgentCmd()
	if err := runConfigured(t, cmd, "--config", good, "--interval", "1s"); err != nil {
		t.Fatal(err)
	}
	fl := cmd.Flags()
	got := func(n string) string { return fl.Lookup(n).Value.String() }
	if got("server") != "https://head:7450" || got("interval") != "1s" || got("label") != "[rack=r2]" || got("login-group") != "corral" {
		t.Errorf("server %s interval %s label %s login-group %s", got("server"), got("interval"), got("label"), got("login-group"))
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\n\"listen\": \"0.0.0.0:7450\"\n}"), 0o600)
	err := runConfigured(t, NewAgentCmd(), "--config", bad)
	if err == nil || !strings.Contains(err.Error(), "config file "+bad+", line 2") {
		t.Errorf("an agent's file with a server flag: %v", err)
	}
	if !cmdkit.IsUsage(err) {
		t.Errorf("%v is not a usage error", err)
	}
	if err := runConfigured(t, NewServerCmd(), "--config", filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("a missing file: %v", err)
	}
}
