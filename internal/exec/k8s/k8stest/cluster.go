// Package k8stest runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver, built from the Go module proxy by test/k8s (see
// scripts/k8s-local.sh build), on 127.0.0.1. No container runtime exists
// here, so Kubelet plays the kubelet's part for the nodes it registers:
// it runs each bound pod's command as a local process, writes the pod's
// status through the API and serves its log to the API server's pod log
// API. What that cannot test is in docs/executors.md.
//
// Tests call Start, which skips the test with a message naming what is
// missing when the binaries are not there.
package k8stest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// BinEnv names the directory holding kube-apiserver and etcd.
const BinEnv = "CORRAL_K8S_BIN"

const token = "corral-test-token"

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	Config *rest.Config
	Client kubernetes.Interface
	URL    string

	bin, dir string
	apiPort  int
	etcdURL  string
	api      *exec.Cmd
	apiDone  chan struct{}
}

// Bins returns the directory of the control plane's binaries, or why
// there is none.
func Bins() (string, error) {
	dir := os.Getenv(BinEnv)
	if dir == "" {
		return "", fmt.Errorf("$%s is not set: build kube-apiserver and etcd with scripts/k8s-local.sh build and set it to their directory", BinEnv)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s not found in $%s=%s (scripts/k8s-local.sh build)", b, BinEnv, dir)
		}
	}
	return dir, nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs etcd and kube-apiserver until the test ends; it skips the
// test when their binaries are not there.
func Start(t testing.TB) *Cluster {
	t.Helper()
	bin, err := Bins()
	if err != nil {
		t.Skipf("no Kubernetes API server to test against: %v", err)
	}
	dir, err := os.MkdirTemp("", "k8stest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &Cluster{bin: bin, dir: dir}
	cp, pp := freePort(t), freePort(t)
	c.etcdURL = "http://127.0.0.1:" + strconv.Itoa(cp)
	peer := "http://127.0.0.1:" + strconv.Itoa(pp)
	etcd := exec.Command(filepath.Join(bin, "etcd"), "--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+c.etcdURL, "--advertise-client-urls="+c.etcdURL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=default="+peer,
		"--unsafe-no-fsync", "--log-level=error")
	c.start(t, etcd, "etcd.log")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.apiPort = freePort(t)
	c.URL = "https://127.0.0.1:" + strconv.Itoa(c.apiPort)
	c.Config = &rest.Config{Host: c.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400}
	c.Client = kubernetes.NewForConfigOrDie(c.Config)
	c.StartAPIServer(t)
	return c
}

// start runs cmd until the test ends, its output in the cluster's dir.
func (c *Cluster) start(t testing.TB, cmd *exec.Cmd, log string) chan struct{} {
	t.Helper()
	f, err := os.Create(filepath.Join(c.dir, log))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return done
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on
// the same port and waits until it is ready.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, "kube-apiserver"), APIServerArgs(c.etcdURL, c.apiPort, c.dir)...)
	c.api = cmd
	c.apiDone = c.start(t, cmd, "kube-apiserver.log")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			break
		}
		select {
		case <-c.apiDone:
			b, _ := os.ReadFile(filepath.Join(c.dir, "kube-apiserver.log"))
			t.Fatalf("kube-apiserver exited: %s", tail(b))
		case <-ctx.Done():
			b, _ := os.ReadFile(filepath.Join(c.dir, "kube-apiserver.log"))
			t.Fatalf("kube-apiserver not ready within 90s: %v\n%s", err, tail(b))
		case <-time.After(200 * time.Millisecond): // a server starting: polled
		}
	}
}

// Kubeconfig writes a kubeconfig file for the cluster (the admin token)
// and returns its path.
func (c *Cluster) Kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(c.dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, c.URL, token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StopAPIServer stops kube-apiserver (etcd keeps the cluster's state).
func (c *Cluster) StopAPIServer(t testing.TB) {
	t.Helper()
	_ = syscall.Kill(-c.api.Process.Pid, syscall.SIGKILL)
	<-c.apiDone
}

// APIServerArgs are kube-apiserver's flags for a test cluster (dir holds
// sa.key and tokens.csv); scripts/k8s-local.sh uses the same.
func APIServerArgs(etcdURL string, port int, dir string) []string {
	return []string{
		"--etcd-servers=" + etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port), "--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"), "--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"), "--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--disable-admission-plugins=ServiceAccount",
		"--kubelet-preferred-address-types=InternalIP", "--endpoint-reconciler-type=none", "--v=1",
	}
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
