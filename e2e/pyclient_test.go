package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonClient runs the Python client's tests (clients/python/tests)
// with the machine's python3 against a live `corral up`: the live ones
// (test_live.py) drive a 20-point sweep, arrays, dependencies, logs,
// cancel, errors, listings and events; the rest check the models against
// the API contract. The package is installed with pip first where pip is
// there (no package index needed: its build backend is in the tree).
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python client is not tested")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "clients", "python")
	s := startServer(t)
	env := cleanEnv("CORRAL_SERVER="+s.URL, "CORRAL_TOKEN="+adminToken, "CORRAL_TEST_LIVE=1",
		"CORRAL_CONFIG="+filepath.Join(t.TempDir(), "none.json"), "PYTHONDONTWRITEBYTECODE=1")

	// Installed as users install it, when pip is there.
	target := t.TempDir()
	install := exec.Command(py, "-m", "pip", "install", "--no-index", "--quiet", "--target", target, src)
	install.Env = env
	if out, err := install.CombinedOutput(); err == nil {
		env = append(env, "PYTHONPATH="+target, "CORRAL_TEST_INSTALLED=1")
	} else if strings.Contains(string(out), "No module named pip") {
		t.Log("pip is not installed: testing the client from its source tree")
	} else {
		t.Fatalf("pip install ./clients/python: %v\n%s", err, out)
	}

	// From tests/, so that the working directory puts no corral of the
	// source tree on the path ahead of the installed one.
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", ".", "-t", ".")
	cmd.Dir = filepath.Join(src, "tests")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s\nserver output:\n%s", err, out, s.out.String())
	}
	if strings.Contains(string(out), "skipped 'needs a live server") {
		t.Fatalf("live tests skipped:\n%s", out)
	}
	t.Logf("%s", out)
}
