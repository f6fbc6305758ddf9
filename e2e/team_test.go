package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestTeamTLSConfigAgentLogin walks docs/team.md on one machine: `corral
// server --config FILE` serving HTTPS with a self-signed certificate and
// signing users in through agents; `corral agent --config FILE` joining it
// with that certificate as --ca-file and serving the login socket; a Unix
// account's `corral login` on the agent's node, with no token handed over,
// and its job run as that account; an account outside the agent's
// --login-group refused. Runs only as root (it makes accounts).
func TestTeamTLSConfigAgentLogin(t *testing.T) {
	// A directory every account may reach: the binary, the CA, the login
	// socket and the accounts' homes (the shared filesystem of two nodes).
	accts := newAccounts(t, "crlt")
	shared := accts.shared
	cert, key := selfSignedCert(t, shared)

	// Step 2 of docs/team.md: the server, from its config file, over TLS.
	port := freePort(t)
	dataDir := t.TempDir()
	serverCfg := writeJSON(t, filepath.Join(t.TempDir(), "server.json"), map[string]any{
		"//":                "as deploy/server.json, on loopback",
		"listen":            fmt.Sprintf("127.0.0.1:%d", port),
		"data-dir":          dataDir,
		"tls-cert":          cert,
		"tls-key":           key,
		"login-from-agents": true,
		"login-socket":      "", // the agent's serves this machine
		"node-ttl":          "5s",
		"heartbeat":         "300ms",
		"cancel-grace":      "2s",
	})
	s := startTLSServer(t, cert, dataDir, port, "server", "--config", serverCfg)

	// Step 4: the agent of the second node, from its config file, the join
	// token in its environment (EnvironmentFile=), the CA as --ca-file.
	group := accts.group
	sock := filepath.Join(shared, "login.sock")
	agentDir := t.TempDir()
	agentCfg := writeJSON(t, filepath.Join(t.TempDir(), "agent.json"), map[string]any{
		"server":        s.URL,
		"ca-file":       cert,
		"data-dir":      agentDir,
		"node-name":     "gpu2",
		"simulate-gpus": "2",
		"interval":      "300ms",
		"run-as":        "user", // over the environment's CORRAL_RUN_AS=agent: the file sets the flag
		"label":         []string{"rack=r2"},
		"login-socket":  sock,
		"login-group":   group,
	})
	a := &agentProc{t: t, s: s, name: "gpu2", dataDir: agentDir, args: []string{"agent", "--config", agentCfg}}
	a.start()
	t.Cleanup(a.stop)
	if n := s.waitNode("gpu2", "up", 10*time.Second); n.Labels["rack"] != "r2" {
		t.Errorf("node gpu2's labels %v; want rack=r2 from the config file", n.Labels)
	}

	// Step 3: Unix accounts; step 5: signing in on the node.
	ana, eve := accts.add("ana", true), accts.add("eve", false)
	as := func(ac account, args ...string) (string, string, int) {
		t.Helper()
		// The CA as the machine's trust store would hold it (SSL_CERT_FILE
		// stands in for update-ca-certificates).
		return accts.run(ac, []string{"CORRAL_LOGIN_SOCKET=" + sock, "SSL_CERT_FILE=" + cert}, args...)
	}

	out, errOut, code := as(ana, "login")
	if code != 0 || !strings.Contains(out, "signed in to "+s.URL+" as "+ana.name) || !strings.Contains(out, sock) {
		t.Fatalf("ana: corral login on the agent's node: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = as(ana, "whoami", "-o", "json")
	var me struct {
		api.Whoami
		Server string `json:"server"`
	}
	if err := json.Unmarshal([]byte(out), &me); err != nil || code != 0 || me.User != ana.name || me.Role != api.RoleUser || me.Server != s.URL {
		t.Fatalf("ana: corral whoami: exit %d %v %+v\n%s%s", code, err, me, out, errOut)
	}
	out, errOut, code = as(ana, "submit", "-o", "json", "--gpus", "1", "--", "id -un; pwd")
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil || code != 0 {
		t.Fatalf("ana: corral submit: exit %d %v\n%s%s", code, err, out, errOut)
	}
	j = s.waitTerminal(j.ID, 30*time.Second)
	if logs := strings.Fields(s.logs(j.ID)); j.User != ana.name || j.State != api.StateCompleted || len(logs) != 2 || logs[0] != ana.name || logs[1] != ana.home {
		t.Errorf("ana's job: user %s, %s %q, output %q; want hers, completed, run as %s in %s", j.User, j.State, j.Message, logs, ana.name, ana.home)
	}

	out, errOut, code = as(eve, "login")
	if code == 0 || !strings.Contains(errOut, "not in the group "+group) {
		t.Errorf("eve, outside the agent's --login-group: exit %d\n%s%s; want refused naming the group", code, out, errOut)
	}
}

// startTLSServer starts a control plane whose flags (listen, data dir, TLS)
// come from args (a config file), and waits until it answers /healthz over
// HTTPS trusting the certificate in caFile.
func startTLSServer(t *testing.T, caFile, dataDir string, port int, args ...string) *server {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := newWithToken(adminToken)
	tr.base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	s := &server{t: t, URL: fmt.Sprintf("https://127.0.0.1:%d", port), Port: port, DataDir: dataDir,
		http: &http.Client{Timeout: 30 * time.Second, Transport: tr},
		proc: &proc{out: &lockedBuffer{}, done: make(chan struct{})}}
	s.cmd = exec.Command(corralBin, args...)
	s.cmd.Env = cleanEnv("CORRAL_ADMIN_TOKEN="+adminToken, "CORRAL_JOIN_TOKEN="+joinToken, "HOME="+t.TempDir(),
		"CORRAL_CONFIG="+filepath.Join(t.TempDir(), "client.json"))
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start corral %s: %v", args[0], err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("corral %s exited before it was ready (%v); output:\n%s", args[0], s.waitErr, s.out.String())
		default:
		}
		if r, err := s.send("GET", "/healthz", nil, nil); err == nil && r.Status == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("corral %s did not answer /healthz over HTTPS within 30s; output:\n%s", args[0], s.out.String())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// selfSignedCert writes a self-signed certificate for 127.0.0.1 and
// localhost, and its key, into dir (the certificate readable by all, as
// a CA file is): its own CA, as in docs/team.md's first TLS recipe.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "corral e2e head"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(t.TempDir(), "server.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// writeJSON writes v as JSON to path and returns path.
func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTeamBackupRestore tries step 8 of docs/team.md: an online snapshot
// of a running server's store with the sqlite3 shell, restored into a new
// data directory, brings back what the store held at the snapshot and
// nothing after it.
func TestTeamBackupRestore(t *testing.T) {
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("no sqlite3 shell on this machine (Debian: apt-get install sqlite3)")
	}
	s := startCluster(t)
	startAgent(t, s, "gpu1", 1)
	before := s.submit(map[string]any{"command": "true", "gpu_count": 1, "name": "before-backup"})
	s.waitState(before.ID, api.StateCompleted, 30*time.Second)
	snap := filepath.Join(t.TempDir(), "corral-snapshot.db")
	// As in the doc: while the server runs and writes.
	if out, err := exec.Command(sqlite, filepath.Join(s.DataDir, "corral.db"), ".backup '"+snap+"'").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 .backup: %v\n%s", err, out)
	}
	after := s.submit(map[string]any{"command": "true", "gpu_count": 1, "name": "after-backup"})
	s.stop()

	restored := t.TempDir()
	copyFile(t, snap, filepath.Join(restored, "corral.db"), 0o600)
	r := startControl(t, restored, freePort(t), []string{"CORRAL_JOIN_TOKEN=" + joinToken}, "server")
	got := map[string]api.Job{}
	for _, j := range r.jobs() {
		got[j.ID] = j
	}
	if j, ok := got[before.ID]; !ok || j.Name != "before-backup" || j.State != api.StateCompleted {
		t.Errorf("the job that ended before the snapshot, after the restore: %+v (found %v); want it completed", j, ok)
	}
	if _, ok := got[after.ID]; ok {
		t.Errorf("the job submitted after the snapshot is in the restored store")
	}
}
