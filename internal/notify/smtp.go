package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// SMTPTimeout bounds one email delivery, from dial to QUIT.
const SMTPTimeout = 30 * time.Second

// SMTP delivers email endpoints' messages through one SMTP server (the
// server's --smtp settings).
type SMTP struct {
	Addr     string // host:port
	From     string
	User     string // AUTH PLAIN when set (only over TLS)
	Password string
	// StartTLS: upgrade with STARTTLS and refuse a server that does not
	// offer it. Off: send in the clear (a relay on localhost only).
	StartTLS bool
	TLS      *tls.Config // nil: the system's roots, ServerName from Addr
}

// Deliver sends m to t.Address as a plain-text email.
func (s SMTP) Deliver(ctx context.Context, t Target, m Message) error {
	if t.Address == "" {
		return Permanent{errors.New("the endpoint has no address")}
	}
	ctx, cancel := context.WithTimeout(ctx, SMTPTimeout)
	defer cancel()
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return Permanent{fmt.Errorf("--smtp %q: %w", s.Addr, err)}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("SMTP server: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("SMTP server: %w", err)
	}
	defer c.Close()
	if err := c.Hello("corral"); err != nil {
		return fmt.Errorf("SMTP HELO: %w", err)
	}
	if s.StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("the SMTP server does not offer STARTTLS")
		}
		cfg := s.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		cfg = cfg.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("SMTP STARTTLS: %w", err)
		}
	}
	if s.User != "" {
		if err := c.Auth(smtp.PlainAuth("", s.User, s.Password, host)); err != nil {
			return Permanent{fmt.Errorf("SMTP AUTH: %w", err)}
		}
	}
	if err := c.Mail(s.From); err != nil {
		return fmt.Errorf("SMTP MAIL FROM: %w", err)
	}
	if err := c.Rcpt(t.Address); err != nil {
		return fmt.Errorf("SMTP RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	if _, err := w.Write(Email(s.From, t.Address, m)); err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	return c.Quit()
}

// Email is m as an RFC 5322 message: a Subject of its one line, a
// plain-text body, and its event_id in X-Corral-Event-Id.
func Email(from, to string, m Message) []byte {
	var b strings.Builder
	hdr := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	hdr("From", from)
	hdr("To", to)
	hdr("Subject", mime.QEncoding.Encode("utf-8", clip(oneLine(m.Subject()), 200)))
	hdr("Date", time.Now().UTC().Format(time.RFC1123Z))
	hdr("Message-ID", "<"+m.EventID+"."+fmt.Sprint(time.Now().UnixNano())+"@corral>")
	hdr(EventIDHeader, m.EventID)
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", "text/plain; charset=utf-8")
	hdr("Content-Transfer-Encoding", "8bit")
	b.WriteString("\r\n")
	// The SMTP client's DATA writer escapes lines that start with a dot.
	for _, l := range strings.Split(m.Text(), "\n") {
		b.WriteString(l + "\r\n")
	}
	return []byte(b.String())
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
