// Command notebookstub stands in for Jupyter in the notebook tests: it
// listens on 127.0.0.1:$CORRAL_NOTEBOOK_PORT, answers any path ending in
// /ws with a WebSocket that echoes each message, and any other path with
// a page that reports what the proxy forwarded (path, Authorization,
// Cookie), so tests can check what reached the notebook. With
// NOTEBOOKSTUB_READY_FILE set, it answers 404 (as an app that serves
// nothing under the proxy's path) until that file exists.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/coder/websocket"
)

func main() {
	port := os.Getenv("CORRAL_NOTEBOOK_PORT")
	if port == "" {
		log.Fatal("notebookstub: CORRAL_NOTEBOOK_PORT is not set")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		log.Fatalf("notebookstub: %v", err)
	}
	fmt.Println("notebookstub listening on", ln.Addr())
	log.Fatal(http.Serve(ln, http.HandlerFunc(serve)))
}

func serve(w http.ResponseWriter, r *http.Request) {
	if f := os.Getenv("NOTEBOOKSTUB_READY_FILE"); f != "" {
		if _, err := os.Stat(f); err != nil {
			http.NotFound(w, r)
			return
		}
	}
	if strings.HasSuffix(r.URL.Path, "/ws") {
		echo(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	http.SetCookie(w, &http.Cookie{Name: "corral_session", Value: "from-the-notebook", Path: "/"})
	http.SetCookie(w, &http.Cookie{Name: "_xsrf", Value: "stub", Path: "/"})
	fmt.Fprintf(w, "notebook stub of %s\npath=%s\nauthorization=%s\ncookie=%s\n",
		os.Getenv("CORRAL_JOB_ID"), r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Cookie"))
}

// echo sends back every message of the WebSocket until it closes.
func echo(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 22)
	ctx := context.Background()
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if err := c.Write(ctx, typ, msg); err != nil {
			return
		}
	}
}
