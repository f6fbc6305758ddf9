package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestOpenNVMLWithoutDriver checks the path taken on machines without an
// NVIDIA driver: a clear error wrapping ErrNoNVML, no panic.
func TestOpenNVMLWithoutDriver(t *testing.T) {
	src, err := OpenNVML()
	if err == nil {
		defer src.Close()
		devs, derr := src.Devices(context.Background())
		t.Skipf("NVML is available here (%d GPUs, err %v); this test needs a machine without a driver", len(devs), derr)
	}
	t.Logf("OpenNVML: %v", err)
	if !errors.Is(err, ErrNoNVML) {
		t.Fatalf("OpenNVML error %v does not wrap ErrNoNVML", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "NVML not available: ") {
		t.Errorf("error %q does not start with %q", msg, "NVML not available: ")
	}
	// A second try fails the same way.
	if _, err2 := OpenNVML(); !errors.Is(err2, ErrNoNVML) {
		t.Errorf("second OpenNVML: %v", err2)
	}
}

func TestCanonicalBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:18:00.0": "00000000:18:00.0",
		"0000:af:00.0":     "00000000:AF:00.0",
		"00000000:AF:00.0": "00000000:AF:00.0",
		"weird":            "WEIRD",
	} {
		if got := canonicalBusID(in); got != want {
			t.Errorf("canonicalBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCString(t *testing.T) {
	if got := cString([]uint8{'a', 'b', 0, 'c'}); got != "ab" {
		t.Errorf("cString = %q", got)
	}
	if got := cString([]uint8{'a', 'b'}); got != "ab" {
		t.Errorf("cString without NUL = %q", got)
	}
}
