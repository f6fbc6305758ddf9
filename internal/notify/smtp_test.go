package notify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/corral-sched/corral/internal/api"
)

// mailbox is a real SMTP server (go-smtp) in the test process: STARTTLS
// with a test certificate, AUTH PLAIN required.
type mailbox struct {
	addr string
	mu   sync.Mutex
	mail []letter
}

type letter struct {
	from, to, data string
	tls, authed    bool
}

type mailSession struct {
	box    *mailbox
	conn   *smtp.Conn
	authed bool
	cur    letter
}

func (s *mailSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *mailSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		if user != "corral" || pass != "smtp-pass-1" {
			return errors.New("bad credentials")
		}
		s.authed = true
		return nil
	}), nil
}
func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.cur.from = from
	return nil
}
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error { s.cur.to = to; return nil }
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.cur.data, s.cur.tls, s.cur.authed = string(b), isTLS, s.authed
	s.box.mu.Lock()
	s.box.mail = append(s.box.mail, s.cur)
	s.box.mu.Unlock()
	return nil
}
func (s *mailSession) Reset()        { s.cur = letter{} }
func (s *mailSession) Logout() error { return nil }

// testCert makes a self-signed certificate for 127.0.0.1 and the pool
// that trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corral-test-smtp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func startMailbox(t *testing.T) (*mailbox, *x509.CertPool) {
	t.Helper()
	cert, pool := testCert(t)
	box := &mailbox{}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &mailSession{box: box, conn: c}, nil }))
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box.addr = ln.Addr().String()
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return box, pool
}

// TestSMTPStartTLSAuth: an email goes to a real SMTP server over STARTTLS
// with AUTH PLAIN and says what happened; a wrong password is a permanent
// error; a server without STARTTLS is refused when it is required.
func TestSMTPStartTLSAuth(t *testing.T) {
	box, pool := startMailbox(t)
	m := SMTP{Addr: box.addr, From: "corral@example.com", User: "corral", Password: "smtp-pass-1", StartTLS: true,
		TLS: &tls.Config{RootCAs: pool}}
	msg := Message{EventID: "n42", Items: []Item{{EventID: "n42", Event: failedJob()}}}
	if err := m.Deliver(context.Background(), Target{Kind: api.EndpointEmail, Address: "ana@example.com"}, msg); err != nil {
		t.Fatal(err)
	}
	box.mu.Lock()
	got := box.mail
	box.mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d mails", len(got))
	}
	g := got[0]
	if !g.tls || !g.authed || g.from != "corral@example.com" || g.to != "ana@example.com" {
		t.Errorf("letter %+v", g)
	}
	for _, w := range []string{"Subject: Job train (j9) (ana): failed: exit code 2", "X-Corral-Event-Id: n42", "Exit code: 2", "CUDA error: out of memory", "https://c.example/#/jobs/j9"} {
		if !strings.Contains(g.data, w) {
			t.Errorf("the letter lacks %q:\n%s", w, g.data)
		}
	}
	bad := m
	bad.Password = "wrong"
	var p Permanent
	if err := bad.Deliver(context.Background(), Target{Kind: api.EndpointEmail, Address: "ana@example.com"}, msg); !errors.As(err, &p) {
		t.Errorf("a wrong password: %v, want a permanent error", err)
	}
	untrusted := m
	untrusted.TLS = nil // the system's roots do not trust the test certificate
	if err := untrusted.Deliver(context.Background(), Target{Kind: api.EndpointEmail, Address: "ana@example.com"}, msg); err == nil {
		t.Errorf("delivered over TLS with an untrusted certificate")
	}
}
