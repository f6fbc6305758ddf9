// Package joblogs keeps jobs' output in files on the control plane's
// disk (DataDir/logs/JOB/ATTEMPT.log, one per rank beside it): chunks
// shipped by remote agents appended without gaps or duplicates, each
// file capped, and the tail of one read back for a failure's
// notification. It knows files only; which node may write which job's
// log is the orchestrator's to check, from its books.
package joblogs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// MaxChunk bounds one shipped chunk.
const MaxChunk = 1 << 20

// Append stores data, a chunk that starts at byte off of the log at
// path. A chunk that starts past the end of what is stored is refused
// (409 log_gap: the agent resends from the end); one that overlaps it
// adds only the new bytes, so retries are harmless. Past limit bytes (0:
// no limit) the log gets one marker line, and later chunks are accepted
// and dropped. A failed write (a full disk) fails only this chunk.
func Append(path string, off int64, data []byte, limit int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write log: %w", err)
	}
	size := st.Size()
	switch {
	case limit > 0 && size >= limit:
		return nil // capped: the marker is there, the rest is dropped
	case off > size:
		return api.Conflict("log_gap", "the stored log ends at byte %d; send from there", size)
	case off+int64(len(data)) <= size:
		return nil // already stored
	}
	data = data[size-off:]
	capped := limit > 0 && size+int64(len(data)) > limit
	if capped {
		data = data[:limit-size]
	}
	if _, err := f.WriteAt(data, size); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	if capped {
		marker := fmt.Sprintf("\ncorral: the stored log reached its limit of %d bytes (--max-log-size of the server); further output of this attempt is dropped\n", limit)
		if _, err := f.WriteAt([]byte(marker), limit); err != nil {
			return fmt.Errorf("write log: %w", err)
		}
	}
	return nil
}

// maxTailBytes bounds how much of a log Tail reads.
const maxTailBytes = 64 << 10

// Tail returns the last n lines of the log at path, each cut to 300
// bytes; nil when there is none.
func Tail(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-maxTailBytes, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(strings.ToValidUTF8(string(b), "?"), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first may be cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 300 {
			lines[i] = l[:300] + "…"
		}
	}
	return lines
}
