package orchestrator

import "iter"

// ring keeps the last values pushed into it, at most the size each push
// names (a node's telemetry, the cluster's history). The zero value is
// empty and ready.
type ring[T any] struct {
	buf  []T
	next int // the oldest value, once buf is full
}

// push adds v, dropping the oldest value once the ring holds size.
func (r *ring[T]) push(v T, size int) {
	if len(r.buf) < size {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
}

// len is how many values the ring holds.
func (r *ring[T]) len() int { return len(r.buf) }

// all yields the values, oldest first.
func (r *ring[T]) all() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for i := range r.buf {
			if !yield(&r.buf[(r.next+i)%len(r.buf)]) {
				return
			}
		}
	}
}
