package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hupIgnored reports whether a new child process starts with SIGHUP
// ignored (bit 0 of SigIgn in /proc/self/status).
func hupIgnored() (bool, error) {
	out, err := exec.Command("/bin/sh", "-c", "grep SigIgn /proc/self/status").Output()
	if err != nil {
		return false, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return false, fmt.Errorf("SigIgn line %q", out)
	}
	mask, err := strconv.ParseUint(f[1], 16, 64)
	return mask&1 != 0, err
}

// TestHangUpChildrenByDefault runs itself again started with SIGHUP
// ignored, as nohup starts a program: there a child starts with SIGHUP
// ignored until hangUpChildrenByDefault, and with its default after,
// while the process itself still survives a SIGHUP.
func TestHangUpChildrenByDefault(t *testing.T) {
	if os.Getenv("CORRAL_TEST_HUP_CHILD") == "1" {
		before, err := hupIgnored()
		if err != nil {
			t.Fatal(err)
		}
		hangUpChildrenByDefault()
		after, err := hupIgnored()
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan os.Signal, 1)
		signal.Notify(got, syscall.SIGHUP)
		if err := exec.Command("/bin/kill", "-HUP", strconv.Itoa(os.Getpid())).Run(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got: // delivered, and the process lives on
		case <-time.After(10 * time.Second):
			t.Fatal("the SIGHUP was never delivered")
		}
		fmt.Printf("child ignored before=%v after=%v\n", before, after)
		return
	}
	cmd := exec.Command("/bin/sh", "-c", `trap '' HUP; exec "$0" -test.run '^TestHangUpChildrenByDefault$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "CORRAL_TEST_HUP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child ignored before=true after=false") {
		t.Fatalf("want SIGHUP ignored for children before and not after, and the process alive after a SIGHUP:\n%s", out)
	}
}
