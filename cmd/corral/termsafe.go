package main

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// termWriter writes the tables and detail views so that what they print
// cannot drive the terminal: job names, commands, node hostnames, GPU models and
// everything else a user or an agent chose reach the screen with their
// control characters written out (ESC as \x1b, a C1 control such as U+009B as
// \u009b), so that a hostile name cannot clear the screen, retitle the
// window, move the cursor over other rows or hide text. Newlines and tabs
// pass (the tables use them); so does every printable character. A UTF-8
// sequence split across two writes is held until it is whole (flush writes
// out an unfinished one).
type termWriter struct {
	w       io.Writer
	pending []byte // the start of a UTF-8 sequence the last write cut
}

// Write writes p with its control characters escaped. It reports len(p)
// when the escaped text was written whole.
func (t *termWriter) Write(p []byte) (int, error) {
	buf := append(t.pending, p...)
	t.pending = nil
	out := make([]byte, 0, len(buf))
	for i := 0; i < len(buf); {
		r, size := utf8.DecodeRune(buf[i:])
		if r == utf8.RuneError && size <= 1 && !utf8.FullRune(buf[i:]) {
			t.pending = append([]byte(nil), buf[i:]...)
			break
		}
		switch {
		case r == '\n' || r == '\t':
			out = append(out, byte(r))
		case r < 0x20 || r == 0x7f:
			out = fmt.Appendf(out, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			out = fmt.Appendf(out, `\u%04x`, r)
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, buf[i])
		default:
			out = append(out, buf[i:i+size]...)
		}
		i += size
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, fmt.Errorf("writing output: %w", err)
	}
	return len(p), nil
}

// flush writes out, escaped, the bytes of a UTF-8 sequence that the last
// write left unfinished.
func (t *termWriter) flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	out := make([]byte, 0, 4*len(t.pending))
	for _, b := range t.pending {
		out = fmt.Appendf(out, `\x%02x`, b)
	}
	t.pending = nil
	if _, err := t.w.Write(out); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}
