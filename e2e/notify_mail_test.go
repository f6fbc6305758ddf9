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
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/corral-sched/corral/internal/api"
)

// A real SMTP server in the test process (go-smtp): STARTTLS with a test
// certificate, AUTH PLAIN required.

const smtpUser, smtpPass = "corral", "e2e-smtp-password-9"

type inbox struct {
	mu   sync.Mutex
	msgs []string // whole messages, of sessions that were TLS and authenticated
}

func (b *inbox) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.msgs...)
}

// find returns the first message holding every one of subs.
func (b *inbox) find(subs ...string) string {
	for _, m := range b.all() {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(m, s)
		}
		if ok {
			return m
		}
	}
	return ""
}

type smtpSession struct {
	box    *inbox
	conn   *smtp.Conn
	authed bool
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != smtpUser || pass != smtpPass {
			return errors.New("bad credentials")
		}
		s.authed = true
		return nil
	}), nil
}
func (s *smtpSession) Mail(string, *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	return nil
}
func (s *smtpSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if _, isTLS := s.conn.TLSConnectionState(); !isTLS {
		return errors.New("not over TLS")
	}
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, string(b))
	s.box.mu.Unlock()
	return nil
}
func (s *smtpSession) Reset()        {}
func (s *smtpSession) Logout() error { return nil }

// startSMTP starts the server; it returns its address and the PEM file of
// its certificate (for --smtp-ca).
func startSMTP(t *testing.T) (*inbox, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "e2e-smtp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "smtp-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	box := &inbox{}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &smtpSession{box: box, conn: c}, nil }))
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return box, ln.Addr().String(), ca
}

// TestNotifyEmailAndAdminAlerts: with --smtp (STARTTLS, AUTH PLAIN, the
// password from $CORRAL_SMTP_PASSWORD), a user's email endpoint gets a
// failed job's mail with its exit code and log tail, and the cluster's
// gets admin alerts: a simulated GPU over temperature (--simulate-faults)
// and scheduling stopped.
func TestNotifyEmailAndAdminAlerts(t *testing.T) {
	box, addr, ca := startSMTP(t)
	faults := filepath.Join(t.TempDir(), "faults.json")
	s := startControl(t, t.TempDir(), freePort(t), []string{"CORRAL_SMTP_PASSWORD=" + smtpPass},
		"up", "--simulate-gpus", "8", "--node-name", "e2e-node", "--heartbeat", "300ms", "--simulate-faults", faults,
		"--smtp", addr, "--smtp-from", "corral@example.com", "--smtp-user", smtpUser, "--smtp-ca", ca,
		"--public-url", "https://corral.example")
	env := []string{"CORRAL_SERVER=" + s.URL}
	add := func(args ...string) api.Endpoint {
		t.Helper()
		out, errOut, code := runCLI(t, env, append([]string{"notify", "add", "-o", "json"}, args...)...)
		var ep api.Endpoint
		if code != 0 || json.Unmarshal([]byte(out), &ep) != nil {
			t.Fatalf("notify add %v: %d %s %s", args, code, out, errOut)
		}
		return ep
	}
	mine := add("email", "ana@example.com")
	ops := add("email", "ops@example.com", "--scope", "cluster")
	if out, errOut, code := runCLI(t, env, "notify", "test", ops.ID); code != 0 {
		t.Fatalf("notify test: %d %s %s", code, out, errOut)
	}
	if box.find("Corral test notification") == "" {
		t.Fatalf("the test mail did not arrive: %q", box.all())
	}
	out, _, _ := runCLI(t, env, "notify", "list")
	if !strings.Contains(out, mine.ID) || strings.Contains(out, "ana@example.com") || !strings.Contains(out, "a…@example.com") {
		t.Errorf("notify list shows the address: %s", out)
	}

	j := s.submit(map[string]any{"name": "mail-fail", "command": "echo loading; echo 'CUDA error: out of memory'; exit 7", "gpu_count": 1})
	s.waitState(j.ID, api.StateFailed, 30*time.Second)
	var mail string
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("the failure's mail; inbox %q", box.all()) }, func() bool {
		mail = box.find("mail-fail", "failed")
		return mail != ""
	})
	for _, w := range []string{"Exit code: 7", "CUDA error: out of memory", "https://corral.example/#/jobs/" + j.ID, "GPUs: 1 on e2e-node", "X-Corral-Event-Id: n"} {
		if !strings.Contains(mail, w) {
			t.Errorf("the mail lacks %q:\n%s", w, mail)
		}
	}

	if err := os.WriteFile(faults, []byte(`[{"gpu":1,"temperature":97}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("the temperature alert; inbox %q", box.all()) }, func() bool {
		return box.find("gpu_temperature", "GPU 1 of node e2e-node is at 97") != ""
	})
	if _, errOut, code := runCLI(t, env, "orchestrator", "stop"); code != 0 {
		t.Fatalf("orchestrator stop: %s", errOut)
	}
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("the scheduler alert; inbox %q", box.all()) }, func() bool {
		return box.find("scheduler_stopped") != ""
	})
	for _, m := range box.all() {
		if strings.Contains(m, "To: ana@example.com") && strings.Contains(m, "alert") {
			t.Errorf("a user's endpoint got an admin alert:\n%s", m)
		}
	}
}
