package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/client"
)

// logWindow is corral logs' --tail and --since: which end of the log to
// print (docs/jobs.md, "Reading logs").
type logWindow struct {
	tail  int    // the last N lines; -1: not asked
	since string // lines stamped at or after this (an age or a time)
}

func (lw logWindow) set() bool { return lw.tail >= 0 || lw.since != "" }

// printLogWindow prints the window of job id's log that lw asks for, read
// from the end by byte ranges (client.LogTail), and returns the attempt
// and the byte where what it read ends, for -f to go on from.
func (c *cli) printLogWindow(ctx context.Context, cl *client.Client, id string, o client.LogsOptions, lw logWindow) (client.LogPart, error) {
	var since time.Time
	if lw.since != "" {
		t, err := parseSince(lw.since, c.now())
		if err != nil {
			return client.LogPart{}, usagef("--since: %w", err)
		}
		since = t
	}
	enough := func(tail []byte, _ bool) bool {
		if lw.tail >= 0 && !client.LastLines(lw.tail)(tail, false) {
			return false
		}
		if !since.IsZero() {
			t, ok := firstStamp(tail)
			return ok && t.Before(since)
		}
		return true
	}
	part, err := cl.LogTail(ctx, id, o, enough)
	if err != nil {
		return part, err
	}
	data := part.Data
	if part.Start > 0 { // the first line read may be cut: drop it
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	if !since.IsZero() {
		var ok bool
		if data, ok = linesSince(data, since); !ok {
			return part, fmt.Errorf("logs of job %s: --since needs lines that begin with a time (2006-01-02T15:04:05Z, 2006-01-02 15:04:05 or [2006-01-02 ...]); this log's have none: use --tail N", id)
		}
	}
	if lw.tail >= 0 {
		data = client.TailLines(data, lw.tail)
	}
	_, err = c.stdout.Write(data)
	return part, err
}

// stampLayouts are the times a log line may begin with: RFC 3339 (Go's
// slog, most JSON loggers), and Python logging's and many others'
// "2006-01-02 15:04:05" with milliseconds after a comma or a dot.
var stampLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05.000", "2006-01-02 15:04:05,000", "2006-01-02 15:04:05"}

// lineStamp is the time a line begins with (after an optional "["), if any.
// Times without a zone are local.
func lineStamp(line []byte) (time.Time, bool) {
	line = bytes.TrimPrefix(line, []byte("["))
	if len(line) < 19 || line[4] != '-' || line[7] != '-' {
		return time.Time{}, false
	}
	s := string(line[:min(len(line), 35)])
	for _, layout := range stampLayouts {
		for end := min(len(s), len(layout)+6); end >= 19; end-- {
			if t, err := time.ParseInLocation(layout, s[:end], time.Local); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// firstStamp is the time of the first stamped whole line of data (its
// first line may be cut, so it is skipped).
func firstStamp(data []byte) (time.Time, bool) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[i+1:]
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if t, ok := lineStamp(line); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// linesSince keeps the lines of data stamped at or after since; a line
// without a time goes with the line before it (a traceback with its
// message). ok is false when no line has a time.
func linesSince(data []byte, since time.Time) (out []byte, ok bool) {
	keep := false
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		if t, stamped := lineStamp(line); stamped {
			ok, keep = true, !t.Before(since)
		}
		if keep {
			out = append(out, line...)
		}
	}
	return out, ok
}
