package joblogs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestAppend: chunks in order are stored, a retried or overlapping one
// adds only its new bytes, one past the end is refused as a gap, and past
// the limit the log ends with one marker line and drops the rest.
func TestAppend(t *testing.T) {
	type chunk struct {
		off     int64
		data    string
		wantGap bool
	}
	for _, tc := range []struct {
		name   string
		limit  int64
		chunks []chunk
		want   string
	}{
		{"in order", 0, []chunk{{0, "ab", false}, {2, "cd", false}}, "abcd"},
		{"retried", 0, []chunk{{0, "ab", false}, {0, "ab", false}}, "ab"},
		{"overlap", 0, []chunk{{0, "abc", false}, {1, "bcde", false}}, "abcde"},
		{"gap", 0, []chunk{{0, "ab", false}, {5, "x", true}}, "ab"},
		{"capped", 4, []chunk{{0, "abc", false}, {3, "defg", false}, {7, "hij", false}}, "abcd\ncorral: the stored log reached its limit of 4 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "logs", "j1", "0.log")
			for _, c := range tc.chunks {
				err := Append(path, c.off, []byte(c.data), tc.limit)
				var ae *api.Error
				if gap := errors.As(err, &ae) && ae.Code == "log_gap"; gap != c.wantGap || err != nil && !gap {
					t.Fatalf("Append(%d, %q) = %v, want gap %v", c.off, c.data, err, c.wantGap)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil || !strings.HasPrefix(string(b), tc.want) || tc.limit == 0 && string(b) != tc.want {
				t.Fatalf("log = %q, %v; want %q", b, err, tc.want)
			}
		})
	}
}

// TestTail: the last n lines, without the trailing newline, long lines
// cut; nothing for a missing or empty file.
func TestTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"+strings.Repeat("x", 400)+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := Tail(path, 2)
	if len(got) != 2 || got[0] != "three" || len(got[1]) != 300+len("…") {
		t.Fatalf("Tail = %q", got)
	}
	if got := Tail(filepath.Join(dir, "none"), 3); got != nil {
		t.Fatalf("Tail of no file = %q", got)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	if got := Tail(empty, 3); got != nil {
		t.Fatalf("Tail of an empty file = %q", got)
	}
}
