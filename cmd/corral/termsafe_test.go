package main

import (
	"bytes"
	"io"
	"testing"
)

func TestTermWriterEscapesControls(t *testing.T) {
	cases := []struct {
		name   string
		writes []string
		want   string
	}{
		{"plain and unicode pass", []string{"job é 日本 ok\tx\n"}, "job é 日本 ok\tx\n"},
		{"ESC sequences", []string{"\x1b]0;pwned\x07\x1b[2Jevil"}, `\x1b]0;pwned\x07\x1b[2Jevil`},
		{"carriage return and backspace", []string{"a\rb\bc\x7f"}, `a\x0db\x08c\x7f`},
		{"C1 CSI", []string{"a\u009b2Jb"}, `a\u009b2Jb`},
		{"C1 split across writes", []string{"a\xc2", "\x9b2J"}, `a\u009b2J`},
		{"rune split across writes", []string{"\xe6\x97", "\xa5"}, "日"},
		{"invalid byte", []string{"a\xffb"}, `a\xffb`},
		{"unfinished at the end", []string{"a\xe6\x97"}, `a\xe6\x97`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w := &termWriter{w: &b}
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestTablesEscapeControls: a job name and command, as any user may choose
// them, reach the terminal of whoever lists the jobs with their control
// characters written out.
func TestTablesEscapeControls(t *testing.T) {
	var b bytes.Buffer
	c := &cli{stdout: &b}
	err := c.emit(nil, func(w io.Writer) error {
		tb := newTable(w, "NAME", "COMMAND")
		tb.row("\x1b]0;pwned\x07\x1b[2Jevil", "echo \u009b2J")
		return tb.flush()
	})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(b.Bytes(), "\x1b\x07") || bytes.Contains(b.Bytes(), []byte("\u009b")) {
		t.Fatalf("control characters reached the output: %q", b.String())
	}
}
