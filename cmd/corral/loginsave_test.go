package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestLoginUnsavedSaysWhatToDo: when corral login gets a token but cannot
// write the client config file (a home that does not exist or is not the
// caller's, e.g. under su without -), it says where it tried and how to
// choose another file, and exits non-zero.
func TestLoginUnsavedSaysWhatToDo(t *testing.T) {
	f := newFakeServer(t)
	f.on("POST", "/auth/invites/redeem", http.StatusCreated, api.LoginAnswer{NewToken: api.NewToken{
		Token: api.Token{ID: "tok-1", User: "ana", Role: api.RoleUser}, Secret: "corral_x"}})
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(notDir, "corral", "config.json") // its parent is a file: never writable, even by root
	t.Setenv("CORRAL_CONFIG", cfg)
	res := runArgs("login", f.srv.URL, "--invite", "corral-invite-x")
	if res.code == 0 || !strings.Contains(res.stderr, "signed in as ana, but the token could not be saved") ||
		!strings.Contains(res.stderr, notDir) || !strings.Contains(res.stderr, "CORRAL_CONFIG") {
		t.Fatalf("corral login with an unwritable config file: exit %d, stderr %q; want a failure naming the path and CORRAL_CONFIG", res.code, res.stderr)
	}
}
