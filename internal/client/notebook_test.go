package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// A notebook is ready only once the notebook server itself answers its
// proxy path with a success or a redirect: the server's own "not yet"
// answers and the app's 404 (it serves nothing under the prefix) are not.
func TestNotebookAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   NotebookProbe
	}{
		{"not running", func(w http.ResponseWriter) {
			writeErr(w, 409, "not_running")
		}, NotebookProbe{}},
		{"not listening", func(w http.ResponseWriter) {
			writeErr(w, 502, "notebook_unreachable")
		}, NotebookProbe{}},
		{"404 from the app", func(w http.ResponseWriter) {
			w.Header().Set(api.NotebookProxiedHeader, "1")
			w.WriteHeader(404)
		}, NotebookProbe{Status: 404}},
		{"500 from the app", func(w http.ResponseWriter) {
			w.Header().Set(api.NotebookProxiedHeader, "1")
			w.WriteHeader(500)
		}, NotebookProbe{Status: 500}},
		{"200", func(w http.ResponseWriter) {
			w.Header().Set(api.NotebookProxiedHeader, "1")
			w.WriteHeader(200)
		}, NotebookProbe{Ready: true, Status: 200}},
		{"redirect to a page that is not there", func(w http.ResponseWriter) {
			// Jupyter's / redirects to /lab: the redirect is the answer,
			// not followed.
			w.Header().Set(api.NotebookProxiedHeader, "1")
			w.Header().Set("Location", "/nowhere")
			w.WriteHeader(302)
		}, NotebookProbe{Ready: true, Status: 302}},
		{"public url", func(w http.ResponseWriter) {
			w.Header().Set(api.NotebookProxiedHeader, "1")
			w.Header().Set(api.NotebookURLHeader, "https://head/proxy/j1/")
			w.WriteHeader(200)
		}, NotebookProbe{Ready: true, Status: 200, PublicURL: "https://head/proxy/j1/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != api.NotebookPath("j1") {
					http.NotFound(w, r) // a followed redirect would land here
					return
				}
				tc.answer(w)
			}))
			defer srv.Close()
			got, err := New(srv.URL).NotebookAnswers(context.Background(), "j1")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func writeErr(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"error":{"code":"` + code + `","message":"m"}}`))
}
