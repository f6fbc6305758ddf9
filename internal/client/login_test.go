package client

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConfigLogin: corral login's writes keep the default server and a
// token per server (mode 0600), localhost and 127.0.0.1 being one
// server; logout forgets one server's token and keeps the rest.
func TestConfigLogin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config.json")
	t.Setenv("CORRAL_CONFIG", path)
	if _, err := SaveServer("http://127.0.0.1:7450", ServerConfig{Token: "admin-secret", DataDir: "/d"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name        string
		do          func() error
		wantDefault string
		tokens      map[string]string // server -> TokenFor
	}{
		{"login to head", func() error { _, err := SaveLogin("https://head:7450/", "head-secret", true); return err },
			"https://head:7450", map[string]string{"https://head:7450": "head-secret", "http://localhost:7450": "admin-secret"}},
		{"login to localhost", func() error { _, err := SaveLogin("localhost:7450", "local-secret", true); return err },
			"http://127.0.0.1:7450", map[string]string{"https://head:7450": "head-secret", "http://127.0.0.1:7450": "local-secret"}},
		{"logout of head", func() error {
			_, had, err := ForgetToken("https://head:7450")
			if !had {
				t.Error("ForgetToken: no token was there")
			}
			return err
		}, "http://127.0.0.1:7450", map[string]string{"https://head:7450": "", "http://127.0.0.1:7450": "local-secret"}},
		{"logout of localhost keeps its data dir", func() error { _, _, err := ForgetToken("http://localhost:7450"); return err },
			"http://127.0.0.1:7450", map[string]string{"http://127.0.0.1:7450": ""}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		c, err := LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		if c.DefaultServer != s.wantDefault {
			t.Errorf("%s: default server %q, want %q", s.name, c.DefaultServer, s.wantDefault)
		}
		for server, want := range s.tokens {
			if got := TokenFor(server); got != want {
				t.Errorf("%s: token for %s = %q, want %q", s.name, server, got, want)
			}
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: config file mode %v %v, want 0600", s.name, fi.Mode(), err)
		}
	}
	c, _ := LoadConfig()
	if _, ok := c.Servers["https://head:7450"]; ok {
		t.Error("a server with nothing left to keep stays in the file")
	}
	if sc := c.Servers["http://127.0.0.1:7450"]; sc.DataDir != "/d" {
		t.Errorf("the local server's data dir was lost: %+v", sc)
	}
}
