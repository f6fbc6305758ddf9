package readview

import (
	"slices"
	"testing"
)

func TestCompareNatural(t *testing.T) {
	names := []string{"gpu-10", "gpu-2", "b", "gpu-1", "a10", "a9", "n01", "n1", "gpu-2a", "gpu-"}
	slices.SortFunc(names, CompareNatural)
	want := []string{"a9", "a10", "b", "gpu-", "gpu-1", "gpu-2", "gpu-2a", "gpu-10", "n01", "n1"}
	if !slices.Equal(names, want) {
		t.Fatalf("sorted %v, want %v", names, want)
	}
}
