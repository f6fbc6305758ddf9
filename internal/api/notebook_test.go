package api

import (
	"strconv"
	"testing"
)

func TestNotebookPort(t *testing.T) {
	seen := map[int]bool{}
	for i := range 200 {
		p := NotebookPort("j"+strconv.Itoa(i), 0)
		if p < 20000 || p > 28999 {
			t.Fatalf("port %d outside 20000..28999", p)
		}
		if p != NotebookPort("j"+strconv.Itoa(i), 0) {
			t.Fatal("NotebookPort is not a function of job and attempt")
		}
		seen[p] = true
	}
	if len(seen) < 190 {
		t.Errorf("200 jobs share %d ports", len(seen))
	}
	if NotebookPort("j1", 0) == NotebookPort("j1", 1) {
		t.Errorf("a retry keeps its port (it may be held by the last attempt)")
	}
}

func TestNotebookSecret(t *testing.T) {
	a0, a1 := NotebookSecret("s", 0), NotebookSecret("s", 1)
	if len(a0) != 48 || a0 == a1 || a0 != NotebookSecret("s", 0) || a0 == NotebookSecret("t", 0) {
		t.Errorf("NotebookSecret: %q %q", a0, a1)
	}
}
