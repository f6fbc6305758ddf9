// Package ring is a ring of the last values pushed into it: a node's
// telemetry, the cluster's history.
package ring

import "iter"

// Ring keeps the last values pushed into it, at most the size each push
// names. The zero value is empty and ready.
type Ring[T any] struct {
	buf  []T
	next int // the oldest value, once buf is full
}

// Push adds v, dropping the oldest value once the ring holds size.
func (r *Ring[T]) Push(v T, size int) {
	if len(r.buf) < size {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
}

// Len is how many values the ring holds.
func (r *Ring[T]) Len() int { return len(r.buf) }

// All yields the values, oldest first.
func (r *Ring[T]) All() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for i := range r.buf {
			if !yield(&r.buf[(r.next+i)%len(r.buf)]) {
				return
			}
		}
	}
}
