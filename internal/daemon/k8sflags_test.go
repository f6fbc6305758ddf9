package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/exec"
)

func TestK8sFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := k8sFlags{kubeconfig: kubeconfig, namespace: "ml", image: "img:1", failures: 3, reset: time.Second, maxReset: time.Minute, nodeSelector: []string{"pool=gpu"}}
	for name, c := range map[string]struct {
		f   func(f *k8sFlags)
		bad string
	}{
		"valid":             {f: func(*k8sFlags) {}},
		"no image":          {f: func(f *k8sFlags) { f.image = "" }, bad: "--k8s-image"},
		"bad selector":      {f: func(f *k8sFlags) { f.nodeSelector = []string{"gpu"} }, bad: "KEY=VALUE"},
		"no kubeconfig":     {f: func(f *k8sFlags) { f.kubeconfig = filepath.Join(t.TempDir(), "none") }, bad: "no cluster"},
		"not in a cluster":  {f: func(f *k8sFlags) { f.inCluster = true }, bad: "--k8s-in-cluster"},
		"breaker":           {f: func(f *k8sFlags) { f.maxReset = time.Millisecond }, bad: "max-reset"},
		"negative keep":     {f: func(f *k8sFlags) { f.keepEnded = -time.Second }, bad: "keep-ended"},
		"unknown context":   {f: func(f *k8sFlags) { f.context = "nope" }, bad: "no cluster"},
		"context by name":   {f: func(f *k8sFlags) { f.context = "x" }},
		"selector with '='": {f: func(f *k8sFlags) { f.nodeSelector = []string{"a=b=c"} }},
	} {
		t.Run(name, func(t *testing.T) {
			f := ok
			c.f(&f)
			e, err := f.executor(nil, func(exec.Update) {}, time.Second, 0, nil)
			if c.bad != "" {
				if err == nil || !strings.Contains(err.Error(), c.bad) {
					t.Errorf("%v, want an error naming %q", err, c.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h := e.Health()[0]; h.Name != "k8s" || h.Pool != "k8s" || h.Address != "https://127.0.0.1:6443" {
				t.Errorf("health %+v", h)
			}
			if o := e.Options(); o.Namespace != "ml" || o.Image != "img:1" || len(o.NodeSelector) != 1 {
				t.Errorf("pod options %+v", o)
			}
		})
	}
}
