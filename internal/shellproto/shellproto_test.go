package shellproto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	big := bytes.Repeat([]byte("x"), MaxPayload+10)
	steps := []func() error{
		func() error { return w.Write(Data, []byte("hello")) },
		func() error { return w.Write(Stderr, []byte("oops")) },
		func() error { return w.WriteResize(40, 120) },
		func() error { return w.Write(EOF, nil) },
		func() error { return w.Write(Error, []byte("job ended")) },
		func() error { return w.Write(Notice, []byte("preempted soon")) },
		func() error { return w.WriteExit(-3) },
		func() error { return w.Write(Data, big) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		t    Type
		body string
	}{{Data, "hello"}, {Stderr, "oops"}, {Resize, ""}, {EOF, ""}, {Error, "job ended"}, {Notice, "preempted soon"}, {Exit, ""}}
	for _, wf := range want {
		f, err := Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != wf.t || (wf.body != "" && string(f.Payload) != wf.body) {
			t.Fatalf("got %v %q, want %c %q", f, f.Payload, wf.t, wf.body)
		}
		switch f.Type {
		case Resize:
			if r, c := f.Size(); r != 40 || c != 120 {
				t.Fatalf("size %dx%d, want 40x120", r, c)
			}
		case Exit:
			if f.Code() != -3 {
				t.Fatalf("code %d, want -3", f.Code())
			}
		}
	}
	// A payload over MaxPayload comes as two frames.
	f1, err := Read(&buf)
	if err != nil || len(f1.Payload) != MaxPayload {
		t.Fatalf("first part: %v %v", f1, err)
	}
	f2, err := Read(&buf)
	if err != nil || len(f2.Payload) != 10 {
		t.Fatalf("second part: %v %v", f2, err)
	}
	if _, err := Read(&buf); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

func TestBadFrames(t *testing.T) {
	for name, raw := range map[string][]byte{
		"unknown type":  {'q', 0, 0, 0, 0},
		"too long":      {'d', 0xff, 0xff, 0xff, 0xff},
		"short resize":  {'r', 0, 0, 0, 2, 0, 1},
		"exit of 1":     {'x', 0, 0, 0, 1, 7},
		"eof with data": {'z', 0, 0, 0, 1, 7},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Read(bytes.NewReader(raw)); !errors.Is(err, ErrFrame) {
				t.Fatalf("err %v, want ErrFrame", err)
			}
		})
	}
	if _, err := Read(bytes.NewReader([]byte{'d', 0, 0, 0, 9, 'a'})); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut frame: %v, want io.ErrUnexpectedEOF", err)
	}
	if err := NewWriter(io.Discard).Write('q', nil); !errors.Is(err, ErrFrame) {
		t.Fatalf("writing an unknown type: %v", err)
	}
}
