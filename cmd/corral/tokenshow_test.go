package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestTokenShow: corral token show prints the token the CLI would send
// (--token, else $CORRAL_TOKEN, else the config file's for the server),
// for the clients that do not read the config file (the TypeScript one,
// curl), and says how to get one when there is none.
func TestTokenShow(t *testing.T) {
	cases := []struct {
		name       string
		config     bool   // the config file keeps tok-file for the default server
		env        string // $CORRAL_TOKEN
		args       []string
		wantCode   int
		wantOut    string
		wantErr    string
		wantSource string // with -o json
	}{
		{name: "from the config file", config: true, wantOut: "tok-file\n", wantSource: "client.json"},
		{name: "CORRAL_TOKEN wins", config: true, env: "tok-env", wantOut: "tok-env\n", wantSource: "CORRAL_TOKEN"},
		{name: "--token wins", config: true, env: "tok-env", args: []string{"--token", "tok-flag"}, wantOut: "tok-flag\n", wantSource: "--token"},
		{name: "none", wantCode: exitError, wantErr: "corral login"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			if tc.config {
				cfg := map[string]any{
					"default_server": f.srv.URL,
					"servers":        map[string]any{f.srv.URL: map[string]any{"token": "tok-file"}},
				}
				b, _ := json.Marshal(cfg)
				if err := os.WriteFile(os.Getenv("CORRAL_CONFIG"), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("CORRAL_TOKEN", tc.env)
			server := []string{}
			if !tc.config {
				server = []string{"--server", f.srv.URL}
			}
			res := runArgs(append(append(server, tc.args...), "token", "show")...)
			if res.code != tc.wantCode || res.stdout != tc.wantOut || !strings.Contains(res.stderr, tc.wantErr) {
				t.Fatalf("corral token show: exit %d, stdout %q, stderr %q; want exit %d, %q, stderr with %q",
					res.code, res.stdout, res.stderr, tc.wantCode, tc.wantOut, tc.wantErr)
			}
			if tc.wantCode != 0 {
				return
			}
			res = runArgs(append(append(server, tc.args...), "token", "show", "-o", "json")...)
			var got tokenShowResult
			if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || res.code != 0 {
				t.Fatalf("-o json: exit %d, %q: %v", res.code, res.stdout, err)
			}
			if got.Token != strings.TrimSpace(tc.wantOut) || got.Server != f.srv.URL || !strings.Contains(got.TokenSource, tc.wantSource) {
				t.Fatalf("-o json: %+v; want token %s, server %s, source with %q", got, tc.wantOut, f.srv.URL, tc.wantSource)
			}
			if n := len(f.requests()); n != 0 {
				t.Fatalf("corral token show sent %d requests; it needs no server", n)
			}
		})
	}
}
