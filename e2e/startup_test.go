package e2e

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestClientStartupInit runs the real binary with GODEBUG=inittrace=1 and
// checks what Corral's own packages allocate at initialisation, which
// every command (a `corral submit` in a shell loop included) pays before
// main: at most 16 KiB and 200 allocations per package. A compiled regexp,
// template or table at package level goes past it (internal/exec/agents'
// agent-id regexp alone was 110 KB in 1,532 allocations). Allocation
// counts, not times: they do not depend on the machine's load.
func TestClientStartupInit(t *testing.T) {
	cmd := exec.Command(corralBin, "--help")
	cmd.Env = cleanEnv("GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("corral --help: %v\n%s", err, out)
	}
	own := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" {
			continue
		}
		pkg := f[1]
		if pkg != "main" && !strings.HasPrefix(pkg, "github.com/corral-sched/corral/") {
			continue
		}
		own++
		bytes, err1 := strconv.Atoi(f[7])
		allocs, err2 := strconv.Atoi(f[9])
		if err1 != nil || err2 != nil {
			t.Fatalf("unexpected inittrace line %q", sc.Text())
		}
		if bytes > 16<<10 || allocs > 200 {
			t.Errorf("%s allocates %d bytes in %d allocations at init: make it lazy (internal/lazyre, sync.OnceValue)", pkg, bytes, allocs)
		}
	}
	if own == 0 {
		t.Fatalf("no init lines of Corral's packages in:\n%s", out)
	}
}
