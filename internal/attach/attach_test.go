package attach

import (
	"sync"
	"testing"
	"time"
)

func TestRegistry(t *testing.T) {
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	r := New(func() time.Time { return at })
	if n, last := r.Attached("j1"); n != 0 || !last.IsZero() {
		t.Fatalf("new registry: %d attached, last %v", n, last)
	}
	d1, d2 := r.Open("j1"), r.Open("j1")
	if n, _ := r.Attached("j1"); n != 2 {
		t.Fatalf("%d attached, want 2", n)
	}
	d1()
	d1() // a second call counts once
	if n, _ := r.Attached("j1"); n != 1 {
		t.Fatalf("%d attached after one close (twice), want 1", n)
	}
	at = at.Add(time.Minute)
	d2()
	n, last := r.Attached("j1")
	if n != 0 || !last.Equal(at) {
		t.Fatalf("after both closed: %d attached, last %v, want 0 and %v", n, last, at)
	}
	r.Forget("j1")
	if _, last := r.Attached("j1"); !last.IsZero() {
		t.Fatalf("forgotten job still has a last close %v", last)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := New(nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { r.Open("j")() })
	}
	wg.Wait()
	if n, last := r.Attached("j"); n != 0 || last.IsZero() {
		t.Fatalf("after 50 open/close: %d attached, last %v", n, last)
	}
}
