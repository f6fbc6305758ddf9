package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTypeScriptClient compiles the TypeScript client and its sweep
// example (clients/typescript, typed by the generated openapi.d.ts) with
// tsc and runs the example with node against a live `corral up`: 20
// points submitted, waited for, the best picked from their logs. It needs
// node and the client tools (npm ci in clients/, as .ci/run does first).
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript client is not tested")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tsc := filepath.Join(root, "clients", "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Skip("the client tools are not installed (cd clients && npm ci): the TypeScript client is not tested")
	}
	out := t.TempDir()
	build := exec.Command(tsc, "-p", filepath.Join(root, "clients", "typescript"), "--outDir", out)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, b)
	}
	// The compiled files are ES modules.
	if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t)
	run := exec.Command(node, filepath.Join(out, "examples", "sweep.js"))
	run.Env = cleanEnv("CORRAL_SERVER="+s.URL, "CORRAL_TOKEN="+adminToken)
	b, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("node sweep.js: %v\n%s\nserver output:\n%s", err, b, s.out.String())
	}
	if got := strings.TrimSpace(string(b)); !strings.HasPrefix(got, "best: lr=0.001") {
		t.Fatalf("sweep.js printed %q, want the best point lr=0.001", got)
	}
	jobs := s.jobs()
	n := 0
	for _, j := range jobs {
		if j.Name == "lr-sweep" && j.State == "completed" {
			n++
		}
	}
	if n != 20 {
		t.Fatalf("%d lr-sweep jobs completed, want 20", n)
	}
}
