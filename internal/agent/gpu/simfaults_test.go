package gpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSimulatedFaults: the GPUs a faults file names report its
// temperature and ECC errors; the others, and every GPU once the file is
// gone, read as usual.
func TestSimulatedFaults(t *testing.T) {
	src := NewSimulated("n1", SimSpec{Count: 4})
	path := filepath.Join(t.TempDir(), "faults.json")
	src.(interface{ SetFaultsFile(string) }).SetFaultsFile(path)
	if err := os.WriteFile(path, []byte(`[{"gpu":2,"temperature":97,"ecc_errors":3},{"gpu":9,"ecc_errors":1}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := src.Telemetry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if *ts[2].Temperature != 97 || ts[2].ECCErrors != 3 {
		t.Errorf("GPU 2 reads %d°C, %d ECC errors", *ts[2].Temperature, ts[2].ECCErrors)
	}
	if *ts[1].Temperature >= 90 || ts[1].ECCErrors != 0 {
		t.Errorf("GPU 1 reads a fault: %+v", ts[1])
	}
	os.Remove(path)
	ts, _ = src.Telemetry(context.Background())
	if *ts[2].Temperature >= 90 || ts[2].ECCErrors != 0 {
		t.Errorf("GPU 2 keeps its fault after the file is gone: %+v", ts[2])
	}
}
