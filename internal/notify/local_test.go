package notify

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestHTTPRefusesLocal: without AllowLocal, a delivery to a loopback,
// link-local or unspecified address (the server's own ports, a cloud's
// metadata service) is refused before any connection, for good, on the
// address the host resolves to (localhost included).
func TestHTTPRefusesLocal(t *testing.T) {
	m := Message{EventID: "n1", Items: []Item{{EventID: "n1", Event: failedJob()}}}
	for _, u := range []string{
		"http://127.0.0.1:22/", "http://127.9.9.9:8080/x", "http://[::1]:7450/", "http://localhost:7450/",
		"http://[::ffff:127.0.0.1]:80/", "http://169.254.169.254/latest/meta-data", "http://[fe80::1]:80/x", "http://0.0.0.0:9/",
	} {
		err := NewHTTP(false).Deliver(context.Background(), Target{Kind: api.EndpointWebhook, URL: u, Secret: "s3cret-key"}, m)
		var p Permanent
		if !errors.As(err, &p) || !strings.Contains(err.Error(), "not sent to") {
			t.Errorf("%s: %v, want a permanent refusal", u, err)
		}
	}
}

// TestRegistryRefusesLocalURLs: an endpoint whose URL names a loopback,
// link-local or unspecified address, or localhost, is refused when it is
// added (422 on url), unless the server allows local targets.
func TestRegistryRefusesLocalURLs(t *testing.T) {
	cases := map[string]struct {
		url        string
		allowLocal bool
		refused    bool
	}{
		"loopback":                {"http://127.0.0.1:22/hook", false, true},
		"loopback, other address": {"http://127.1.2.3/hook", false, true},
		"loopback v6":             {"http://[::1]:7450/hook", false, true},
		"loopback v4 in v6":       {"http://[::ffff:127.0.0.1]/hook", false, true},
		"localhost":               {"http://localhost:7450/hook", false, true},
		"localhost, upper case":   {"http://LocalHost./hook", false, true},
		"a name under localhost":  {"http://api.localhost/hook", false, true},
		"link-local":              {"http://169.254.169.254/latest", false, true},
		"link-local v6":           {"http://[fe80::1]/hook", false, true},
		"unspecified":             {"http://0.0.0.0:9/hook", false, true},
		"multicast, even allowed": {"http://224.0.0.1/hook", true, true},
		"public":                  {"https://hooks.example.com/x", false, false},
		"private network":         {"http://10.1.2.3:8080/hook", false, false},
		"loopback, allowed":       {"http://127.0.0.1:9000/hook", true, false},
		"localhost, allowed":      {"http://localhost:9000/hook", true, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg, _ := newTestRegistry(t)
			reg.AllowLocal(tc.allowLocal)
			_, err := reg.Add(context.Background(), api.EndpointRequest{Kind: api.EndpointWebhook, URL: tc.url, Secret: "s3cret-key"}, "test")
			if !tc.refused {
				if err != nil {
					t.Fatalf("%s: %v, want it taken", tc.url, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s: taken, want 422 on url", tc.url)
			}
			if e := api.AsError(err); e.Status != 422 || e.Field != "url" {
				t.Fatalf("%s: %v, want 422 on url", tc.url, err)
			}
		})
	}
}

// TestNoAnswerUniform: whatever stands at the other end of the port (no
// one, a service that is not HTTP, one that resets), a delivery that gets
// no HTTP answer fails with one text, so that the delivery log and the
// endpoint test do not map which ports are open. The log keeps the cause.
func TestNoAnswerUniform(t *testing.T) {
	closed := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	serving := func(t *testing.T, serve func(net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); serve(c) }()
			}
		}()
		return ln.Addr().String()
	}
	ports := map[string]func(t *testing.T) string{
		"closed": closed,
		"ssh": func(t *testing.T) string {
			return serving(t, func(c net.Conn) { io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n") })
		},
		"closes at once": func(t *testing.T) string { return serving(t, func(net.Conn) {}) },
		"resets": func(t *testing.T) string {
			return serving(t, func(c net.Conn) { c.(*net.TCPConn).SetLinger(0) })
		},
		"redis": func(t *testing.T) string {
			return serving(t, func(c net.Conn) {
				c.Read(make([]byte, 4096))
				io.WriteString(c, "-ERR unknown command 'POST'\r\n")
			})
		},
	}
	m := Message{EventID: "n1", Items: []Item{{EventID: "n1", Event: failedJob()}}}
	texts := map[string]string{}
	for name, port := range ports {
		err := (HTTP{AllowLocal: true}).Deliver(context.Background(), Target{Kind: api.EndpointWebhook, URL: "http://" + port(t) + "/hook", Secret: "s3cret-key"}, m)
		if err == nil {
			t.Fatalf("%s: delivered", name)
		}
		texts[err.Error()] += name + " "
		if Cause(err) == "" || Cause(err) == err.Error() {
			t.Errorf("%s: the log's cause %q says nothing more than the error", name, Cause(err))
		}
	}
	if len(texts) != 1 {
		t.Fatalf("the errors differ by what stands at the port: %q", texts)
	}
}
