package gpu

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoNVML reports that NVML cannot be used on this machine: the library
// libnvidia-ml.so is missing (no NVIDIA driver), the driver is not loaded,
// or the binary was built without cgo. Callers test for it with errors.Is,
// and may suggest --simulate-gpus.
var ErrNoNVML = errors.New("NVML not available")

// OpenNVML initializes NVML and returns a Source for this machine's NVIDIA
// GPUs. The NVML library is loaded at run time, so this works (by returning
// an error wrapping ErrNoNVML) on machines without a driver. The caller must
// Close the Source.
func OpenNVML() (Source, error) {
	return openNVML()
}

// canonicalBusID returns a PCI bus id in NVML's "DDDDDDDD:BB:DD.F" form,
// upper-case hex, so that ids from different queries compare equal.
func canonicalBusID(id string) string {
	id = strings.TrimSpace(id)
	var domain, bus, dev, fn uint32
	if n, err := fmt.Sscanf(id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn); err == nil && n == 4 {
		return fmt.Sprintf("%08X:%02X:%02X.%X", domain, bus, dev, fn)
	}
	return strings.ToUpper(id)
}

// cString returns the NUL-terminated string at the start of b (NVML's
// char arrays, int8 or uint8 as go-nvml's version has them).
func cString[T int8 | uint8](b []T) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
