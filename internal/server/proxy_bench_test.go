package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/corral-sched/corral/internal/api"
)

// BenchmarkProxy measures a notebook's request and WebSocket round trip
// through the proxy (authentication, the job's checks, the attach
// registry, the reverse proxy) against the same calls straight to the
// notebook, in the same run.
func BenchmarkProxy(b *testing.B) {
	nb := notebookStub(b)
	d := &fakeDialer{addr: nb.Listener.Addr().String()}
	url, job, alice := notebookServer(b, WithNodeDialer(d))
	direct, proxied := nb.URL+api.NotebookPath(job.ID), url+api.NotebookPath(job.ID)
	hc := &http.Client{}
	for _, c := range []struct{ name, url string }{{"http/direct", direct}, {"http/proxy", proxied}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("GET", c.url+"lab", nil)
				req.Header.Set("Authorization", "Bearer "+alice)
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
	for _, c := range []struct{ name, url string }{{"ws/direct", direct}, {"ws/proxy", proxied}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(c.url, "http")+"api/ws", &websocket.DialOptions{HTTPHeader: bearer(alice)})
			if err != nil {
				b.Fatal(err)
			}
			defer ws.CloseNow()
			msg := []byte(strings.Repeat("x", 1024))
			for b.Loop() {
				if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
					b.Fatal(err)
				}
				if _, _, err := ws.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
