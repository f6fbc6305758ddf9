package daemon

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The files of deploy/: systemd units and example config files
// (docs/team.md, "The systemd units").

// TestDeployConfigs: the example config files load with the real
// commands' flags.
func TestDeployConfigs(t *testing.T) {
	for file, mk := range map[string]func() *cobra.Command{
		"server.json": NewServerCmd, "agent.json": NewAgentCmd, "up.json": NewUpCmd,
	} {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join("..", "..", "deploy", file)
			if _, err := os.Stat(path); err != nil {
				t.Fatal(err)
			}
			if err := runConfigured(t, mk(), "--config", path); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// unitKeys reads a unit file's settings, KEY -> values in order.
func unitKeys(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no KEY=VALUE line", path, line)
		}
		keys[k] = append(keys[k], v)
	}
	return keys
}

// TestDeployUnits: the units say what the walk in docs/team.md relies on
// (the agent's jobs outlive it, it manages cgroups and is not sandboxed;
// the server is), name config files that exist in deploy/, and pass
// systemd-analyze verify where it is installed.
func TestDeployUnits(t *testing.T) {
	for unit, tc := range map[string]struct {
		config string
		want   map[string]string // key -> value it must have
		absent []string          // keys it must not set
	}{
		"corral-server.service": {config: "server.json",
			want: map[string]string{"User": "corral", "ProtectSystem": "strict", "NoNewPrivileges": "yes", "StateDirectory": "corral",
				"EnvironmentFile": "-/etc/corral/server.env", "ProtectControlGroups": "yes", "RuntimeDirectoryPreserve": "yes"}},
		"corral-agent.service": {config: "agent.json",
			want: map[string]string{"KillMode": "process", "Delegate": "yes", "TasksMax": "infinity", "EnvironmentFile": "-/etc/corral/agent.env",
				"StateDirectory": "corral-agent"},
			absent: []string{"User", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "ProtectControlGroups", "NoNewPrivileges",
				"RestrictSUIDSGID", "SystemCallFilter", "MemoryDenyWriteExecute", "CapabilityBoundingSet", "DevicePolicy", "DeviceAllow",
				"ProtectClock", "OOMScoreAdjust", "RestrictNamespaces", "PrivateUsers"}},
	} {
		t.Run(unit, func(t *testing.T) {
			path := filepath.Join("..", "..", "deploy", unit)
			keys := unitKeys(t, path)
			for k, v := range tc.want {
				if got := keys[k]; len(got) != 1 || got[0] != v {
					t.Errorf("%s=%q; want %q", k, got, v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := keys[k]; ok {
					t.Errorf("%s=%q is set: it would hold the jobs too", k, v)
				}
			}
			exec0 := keys["ExecStart"]
			if len(exec0) != 1 || !strings.HasSuffix(exec0[0], "--config /etc/corral/"+tc.config) {
				t.Fatalf("ExecStart=%q; want it to end with --config /etc/corral/%s", exec0, tc.config)
			}
			if _, err := os.Stat(filepath.Join("..", "..", "deploy", tc.config)); err != nil {
				t.Errorf("ExecStart's config file: %v", err)
			}

			sa, err := exec.LookPath("systemd-analyze")
			if err != nil {
				t.Skip("no systemd-analyze on this machine (Debian: apt-get install systemd)")
			}
			// verify wants ExecStart's binary to exist: any executable will do.
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			b = bytes.ReplaceAll(b, []byte("/usr/local/bin/corral "), []byte(self+" "))
			tmp := filepath.Join(t.TempDir(), unit)
			if err := os.WriteFile(tmp, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(sa, "verify", tmp).CombinedOutput()
			// verify exits 0 on unknown keys and bad values, which it
			// reports: any output is a finding.
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
			}
		})
	}
}
