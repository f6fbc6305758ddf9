package lazyre

import (
	"sync"
	"testing"
)

func TestCompiledOnceOnFirstUse(t *testing.T) {
	r := New(`^a(b+)$`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.MatchString("abb") || r.MatchString("ac") {
				t.Error("wrong match")
			}
		}()
	}
	wg.Wait()
	if r.Re() != r.Re() {
		t.Fatal("compiled more than once")
	}
	if m := r.FindAllStringSubmatch("abbb", -1); len(m) != 1 || m[0][1] != "bbb" {
		t.Fatalf("submatch = %q", m)
	}
}

func TestBadPatternPanicsAtFirstUse(t *testing.T) {
	r := New(`(`) // declaring it is fine
	defer func() {
		if recover() == nil {
			t.Fatal("a bad pattern did not panic at its first use")
		}
	}()
	r.MatchString("x")
}
