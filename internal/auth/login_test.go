package auth

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// TestPeerCred: the server end of a real Unix socket connection learns
// the connecting process's uid, gid and pid from the kernel.
func TestPeerCred(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := ListenLoginSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan Cred, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		defer c.Close()
		cr, err := PeerCred(c)
		if err != nil {
			t.Error(err)
		}
		got <- cr
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cr := <-got
	if cr.UID != uint32(os.Getuid()) || cr.GID != uint32(os.Getgid()) || cr.PID != int32(os.Getpid()) {
		t.Errorf("PeerCred = %+v; want uid %d gid %d pid %d", cr, os.Getuid(), os.Getgid(), os.Getpid())
	}
	if _, err := ListenLoginSocket(path); err == nil {
		t.Error("a second listener took a socket that another one serves")
	}
}

// TestDevices: codes expire after DeviceTTL, a wrong code approves
// nothing, an approved code gives its principal once.
func TestDevices(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	d := NewDevices(func() time.Time { return now })
	cases := []struct {
		name    string
		advance time.Duration
		approve string // "": the right code
		wrong   bool
		want    int // Poll's status after; 0: the principal
	}{
		{"approved", time.Minute, "", false, 0},
		{"pending", time.Minute, "-", false, 409},
		{"wrong code", time.Minute, "ZZZZ-ZZZZ", true, 409},
		{"expired", DeviceTTL, "", false, 410},
	}
	for _, c := range cases {
		user, device, _, err := d.Start()
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(c.advance)
		code := user
		if c.approve != "" {
			code = c.approve
		}
		if c.approve != "-" {
			err := d.Approve(code, Principal{User: "ana", Role: api.RoleUser})
			switch {
			case c.wrong && api.AsError(err).Status != 404:
				t.Errorf("%s: approve: %v; want 404", c.name, err)
			case !c.wrong && c.want == 410 && api.AsError(err).Status != 404:
				t.Errorf("%s: approve: %v; want 404 (expired)", c.name, err)
			case !c.wrong && c.want == 0 && err != nil:
				t.Errorf("%s: approve: %v", c.name, err)
			}
		}
		p, err := d.Poll(device)
		if c.want == 0 {
			if err != nil || p.User != "ana" {
				t.Errorf("%s: poll: %+v %v", c.name, p, err)
			}
			if _, err := d.Poll(device); api.AsError(err).Status != 410 {
				t.Errorf("%s: second poll: %v; want 410", c.name, err)
			}
			continue
		}
		if api.AsError(err).Status != c.want {
			t.Errorf("%s: poll: %v; want %d", c.name, err, c.want)
		}
	}
}

// TestLoginReplaces: a login revokes the user's previous token of the
// same key only; its expiry is capped by NotAfter.
func TestLoginReplaces(t *testing.T) {
	m := &memStore{tokens: map[string]store.TokenRecord{}}
	s, err := New(context.Background(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a1, _, err := s.Login(ctx, Grant{User: "ana", Login: "socket:n1"})
	if err != nil {
		t.Fatal(err)
	}
	b1, _, _ := s.Login(ctx, Grant{User: "bo", Login: "socket:n1"})
	a2, _, _ := s.Login(ctx, Grant{User: "ana", Login: "device:laptop"})
	soon := time.Now().Add(time.Hour)
	a3, replaced, _ := s.Login(ctx, Grant{User: "ana", Login: "socket:n1", NotAfter: &soon})
	if replaced != a1.ID {
		t.Errorf("replaced %q, want %s", replaced, a1.ID)
	}
	for _, c := range []struct {
		name   string
		secret string
		ok     bool
	}{{"ana's first socket token", a1.Secret, false}, {"bo's", b1.Secret, true}, {"ana's device token", a2.Secret, true}, {"ana's new socket token", a3.Secret, true}} {
		if _, err := s.Authenticate(c.secret); (err == nil) != c.ok {
			t.Errorf("%s: works %v, want %v", c.name, err == nil, c.ok)
		}
	}
	if a3.ExpiresAt == nil || a3.ExpiresAt.After(soon) {
		t.Errorf("expiry %v, want at most %v", a3.ExpiresAt, soon)
	}
}
