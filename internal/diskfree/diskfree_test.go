package diskfree

import "testing"

func TestPercent(t *testing.T) {
	p, err := Percent(t.TempDir())
	if err != nil || p < 0 || p > 100 {
		t.Fatalf("Percent(temp dir) = %v, %v; want 0..100", p, err)
	}
	if _, err := Percent("/no/such/dir/anywhere"); err == nil {
		t.Fatal("Percent of a missing path: no error")
	}
}
