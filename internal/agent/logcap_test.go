package agent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// flakyWriter fails the writes numbered in fail (from 0), writing nothing.
type flakyWriter struct {
	buf  bytes.Buffer
	n    int
	fail map[int]bool
}

func (w *flakyWriter) Write(p []byte) (int, error) {
	defer func() { w.n++ }()
	if w.fail[w.n] {
		return 0, errors.New("no space left on device")
	}
	return w.buf.Write(p)
}

func TestCopyCapped(t *testing.T) {
	tests := map[string]struct {
		in           string
		start, limit int64
		fail         map[int]bool
		want         string // the log; "MARK" stands for the cap marker
		res          copyResult
	}{
		"no cap":              {in: "hello world", want: "hello world", res: copyResult{Written: 11}},
		"under the cap":       {in: "hello", limit: 10, want: "hello", res: copyResult{Written: 5}},
		"exactly the cap":     {in: "0123456789", limit: 10, want: "0123456789", res: copyResult{Written: 10}},
		"over the cap":        {in: "0123456789abc", limit: 10, want: "0123456789MARK", res: copyResult{Written: 10, Dropped: 3}},
		"cap met before":      {in: "abc", start: 10, limit: 10, want: "", res: copyResult{Dropped: 3}},
		"start counts":        {in: "abcdef", start: 7, limit: 10, want: "abcMARK", res: copyResult{Written: 3, Dropped: 3}},
		"a write fails":       {in: "ab", fail: map[int]bool{0: true}, want: lostMarker(1, errors.New("no space left on device")) + "b", res: copyResult{Written: 1, Lost: 1}},
		"lost bytes count":    {in: "abcd", limit: 3, fail: map[int]bool{0: true}, want: lostMarker(1, errors.New("no space left on device")) + "bcMARK", res: copyResult{Written: 2, Lost: 1, Dropped: 1}},
		"fails to the end":    {in: "ab", fail: map[int]bool{0: true, 1: true, 2: true, 3: true}, want: "", res: copyResult{Lost: 2}},
		"empty input, no cap": {in: "", limit: 10, want: ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w := &flakyWriter{fail: tt.fail}
			// One byte per read, so that every write is its own.
			res := copyCapped(w, iotest.OneByteReader(strings.NewReader(tt.in)), tt.start, tt.limit)
			want := strings.ReplaceAll(tt.want, "MARK", capMarker(tt.limit))
			if got := w.buf.String(); got != want || res != tt.res {
				t.Errorf("log %q, %+v; want %q, %+v", got, res, want, tt.res)
			}
		})
	}
}

// A flood through the pipe is capped with one marker, and the writer is
// never blocked: everything it writes is read.
func TestLogPipeFlood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "job", "0.log")
	f, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := startLogPipe(f, 1000)
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Repeat([]byte("y\n"), 32<<10)
	for range 64 { // 4 MiB, far more than a pipe holds
		if _, err := p.w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	res, ok := p.finish()
	if !ok || res.Written != 1000 || res.Dropped != 64*int64(len(line))-1000 {
		t.Fatalf("finish: %+v %v", res, ok)
	}
	b, _ := os.ReadFile(path)
	if len(b) != 1000+len(capMarker(1000)) || strings.Count(string(b), "corral:") != 1 {
		t.Errorf("log of %d bytes, %d markers", len(b), strings.Count(string(b), "corral:"))
	}
	for _, pth := range []string{path, filepath.Dir(path)} {
		fi, _ := os.Stat(pth)
		if want := map[bool]os.FileMode{true: 0o700, false: 0o600}[fi.IsDir()]; fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", pth, fi.Mode().Perm(), want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{100: "100 B", 1 << 30: "1 GiB", 1536: "1.5 KiB", 500 << 20: "500 MiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
