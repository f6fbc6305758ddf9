package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestLoginUnixAccounts: `corral up` as root; two Unix accounts in the
// login group each run `corral login` as themselves, with no token given
// and no server named, then `corral submit`: the job is theirs and runs as
// their account. A third account, outside --login-group, is refused.
// Runs only as root (it makes accounts with useradd).
func TestLoginUnixAccounts(t *testing.T) {
	// A directory every account may reach: the login socket, the
	// binary, the accounts' homes.
	accts := newAccounts(t, "crl")
	shared, group := accts.shared, accts.group
	ana, bo, eve := accts.add("ana", true), accts.add("bo", true), accts.add("eve", false)

	sock := filepath.Join(shared, "login.sock")
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "2", "--node-name", "login-node",
		"--run-as", "user", "--login-socket", sock, "--login-group", group)
	// The banner's sign-in line comes once the socket is served, after
	// /healthz first answers.
	waitFor(t, 10*time.Second, func() string { return "the banner to name the login socket:\n" + s.out.String() },
		func() bool { return strings.Contains(s.out.String(), "login socket "+sock) })

	// as runs the CLI as a, in its home, with nothing of Corral in its
	// environment but where the login socket is.
	as := func(a account, args ...string) (string, string, int) {
		t.Helper()
		return accts.run(a, []string{"CORRAL_LOGIN_SOCKET=" + sock}, args...)
	}

	for _, a := range []account{ana, bo} {
		out, errOut, code := as(a, "login")
		if code != 0 || !strings.Contains(out, "signed in to "+s.URL+" as "+a.name) {
			t.Fatalf("%s: corral login: exit %d\n%s%s", a.name, code, out, errOut)
		}
		cfg := filepath.Join(a.home, ".config", "corral", "config.json")
		if fi, err := os.Stat(cfg); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: the config file: %v %v; want mode 0600", a.name, fi, err)
		}
		out, errOut, code = as(a, "whoami", "-o", "json")
		var me struct {
			api.Whoami
			Server       string `json:"server"`
			ServerSource string `json:"server_source"`
			TokenSource  string `json:"token_source"`
		}
		if err := json.Unmarshal([]byte(out), &me); err != nil || code != 0 {
			t.Fatalf("%s: corral whoami: exit %d %v\n%s%s", a.name, code, err, out, errOut)
		}
		if me.User != a.name || me.Role != api.RoleUser || me.Server != s.URL || me.TokenSource != cfg || !strings.HasPrefix(me.ServerSource, "default_server") {
			t.Errorf("%s: whoami: %+v", a.name, me)
		}
		out, errOut, code = as(a, "submit", "-o", "json", "--gpus", "0", "--", "id -un")
		var j api.Job
		if err := json.Unmarshal([]byte(out), &j); err != nil || code != 0 {
			t.Fatalf("%s: corral submit: exit %d %v\n%s%s", a.name, code, err, out, errOut)
		}
		j = s.waitTerminal(j.ID, 30*time.Second)
		if logs := s.logs(j.ID); j.User != a.name || j.State != api.StateCompleted || strings.TrimSpace(logs) != a.name {
			t.Errorf("%s: the job is %s's, %s %q, output %q; want %s's, completed, run as %s", a.name, j.User, j.State, j.Message, logs, a.name, a.name)
		}
	}

	// Signing in again replaces the token: ana's first one stops working.
	first := readConfigToken(t, ana.home, s.URL)
	if _, _, code := as(ana, "login"); code != 0 {
		t.Fatal("ana's second login failed")
	}
	if r, _ := s.send("GET", "/auth/whoami", nil, map[string]string{"Authorization": "Bearer " + first}); r.Status != 401 {
		t.Errorf("ana's first login token after a second login: %d; want 401", r.Status)
	}
	// logout revokes and forgets.
	second := readConfigToken(t, ana.home, s.URL)
	if out, errOut, code := as(ana, "logout"); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("ana: corral logout: exit %d\n%s%s", code, out, errOut)
	}
	if r, _ := s.send("GET", "/auth/whoami", nil, map[string]string{"Authorization": "Bearer " + second}); r.Status != 401 {
		t.Errorf("ana's token after logout: %d; want 401", r.Status)
	}
	if tok := readConfigToken(t, ana.home, s.URL); tok != "" {
		t.Error("logout left the token in the config file")
	}

	out, errOut, code := as(eve, "login")
	if code == 0 || !strings.Contains(errOut, "not in the group "+group) {
		t.Errorf("eve, outside the login group: exit %d\n%s%s; want refused naming the group", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(eve.home, ".config", "corral", "config.json")); err == nil {
		t.Error("eve's refused login wrote a config file")
	}
}

// readConfigToken is the token the config file in home keeps for server.
func readConfigToken(t *testing.T, home, server string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, ".config", "corral", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Servers map[string]struct {
			Token string `json:"token"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Servers[server].Token
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(fmt.Errorf("chmod: %w", err))
	}
}
