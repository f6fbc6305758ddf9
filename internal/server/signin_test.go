package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestSignInLinkNeverReplacesASession: opening a sign-in link (/?token=)
// sets no cookie, with or without a session (the page asks first); the
// switch is only POST /auth/session, which a browser must send with the
// dashboard's header from this origin, so another site's form cannot
// sign its visitor in as someone else (login CSRF).
func TestSignInLinkNeverReplacesASession(t *testing.T) {
	e := newAuthEnv(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ownerCookie := sessionCookie + "=" + e.tokens["owner"]
	for _, cookie := range []string{"", ownerCookie} {
		req, _ := http.NewRequest("GET", e.url+"/?token="+e.tokens["other"], nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET /?token= (cookie %q): %d, cookies %v, Cache-Control %q; want the page, no cookie, no-store",
				cookie, resp.StatusCode, resp.Cookies(), resp.Header.Get("Cache-Control"))
		}
	}
	// The session is still alice's.
	whoami := func() string {
		_, b := e.do("anon", "GET", "/auth/whoami", "", map[string]string{"Cookie": ownerCookie})
		var w api.Whoami
		json.Unmarshal(b, &w)
		return w.User
	}
	if u := whoami(); u != "alice" {
		t.Fatalf("the session is %q's after the link, want alice's", u)
	}
	body := `{"token":"` + e.tokens["other"] + `"}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"another site's form", map[string]string{"Cookie": ownerCookie, "Content-Type": "text/plain", "Origin": "https://evil.example"}, 403},
		{"no dashboard header", map[string]string{"Cookie": ownerCookie}, 403},
		{"header, another origin", map[string]string{"Cookie": ownerCookie, csrfHeader: "1", "Origin": "https://evil.example"}, 403},
		{"no session yet, another site's form", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, 403},
		{"the dashboard's button", map[string]string{"Cookie": ownerCookie, csrfHeader: "1", "Origin": e.url}, 200},
	} {
		resp, b := e.do("anon", "POST", "/auth/session", body, tc.headers)
		set := len(resp.Cookies()) != 0
		if resp.StatusCode != tc.status || set != (tc.status == 200) {
			t.Errorf("%s: %d, cookie set %v: %s", tc.name, resp.StatusCode, set, b)
		}
	}
}

// TestSessionCookieEndsWithItsToken: a session of a token that expires
// sooner than the cookie's 30 days lasts only as long as the token.
func TestSessionCookieEndsWithItsToken(t *testing.T) {
	e := newAuthEnv(t)
	resp, b := e.do("admin", "POST", "/auth/tokens", `{"user":"tim","role":"viewer","expires_in":"1h"}`, nil)
	var nt api.NewToken
	if resp.StatusCode != 201 || json.Unmarshal(b, &nt) != nil {
		t.Fatalf("token: %d %s", resp.StatusCode, b)
	}
	resp, _ = e.do("anon", "POST", "/auth/session", `{"token":"`+nt.Secret+`"}`, map[string]string{csrfHeader: "1"})
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie && (c.MaxAge > 3600 || c.MaxAge < 3500) {
			t.Fatalf("the cookie of a token that expires in an hour lasts %ds", c.MaxAge)
		}
	}
	if len(resp.Cookies()) != 1 {
		t.Fatalf("sign-in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}
