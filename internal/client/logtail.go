package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// logChunk is how much LogTail asks for at first; each further request
// asks for twice as much, up to logChunkMax.
const (
	logChunk    = 16 << 10
	logChunkMax = 1 << 20
)

// LogPart is a piece of a job's log read by LogTail: Data is the bytes
// [Start, Size) of the log of Attempt, Size the log's size when read.
type LogPart struct {
	Data    []byte
	Start   int64
	Size    int64
	Attempt int
}

// LogTail reads the end of a job's log by byte ranges (GET
// /jobs/{id}/logs with Range: bytes=A-B), a chunk at a time backwards,
// until enough (a function of the bytes read from the end) says it has
// what it needs or the log's start is reached; it never reads the whole
// log of a long-running job to show its last lines. o picks the attempt
// and rank; all chunks come from the same attempt (the first answer's).
// A server without ranges answers the whole log, which is used as is.
func (c *Client) LogTail(ctx context.Context, id string, o LogsOptions, enough func(tail []byte, atStart bool) bool) (LogPart, error) {
	p, err := pathID("job", id)
	if err != nil {
		return LogPart{}, err
	}
	o.Follow, o.Offset = false, 0
	var part LogPart
	size := int64(-1) // unknown until the first answer
	chunk := int64(logChunk)
	for {
		rng := "bytes=-" + strconv.FormatInt(chunk, 10)
		if size >= 0 {
			rng = fmt.Sprintf("bytes=%d-%d", max(part.Start-chunk, 0), part.Start-1)
		}
		r := logsRequest(p, o)
		r.stream = false
		r.header.Set("Range", rng)
		data, start, total, attempt, err := c.logRange(ctx, r)
		if err != nil {
			return LogPart{}, fmt.Errorf("logs of job %s: %w", id, err)
		}
		if size < 0 {
			size, part = total, LogPart{Data: data, Start: start, Size: total, Attempt: attempt}
			if o.Attempt == nil {
				o.Attempt = &part.Attempt // the rest from the same attempt
			}
		} else {
			part.Data = append(data, part.Data...)
			part.Start = start
		}
		if part.Start <= 0 || enough(part.Data, false) {
			return part, nil
		}
		chunk = min(chunk*2, logChunkMax)
	}
}

// logRange performs a ranged log request and returns its bytes, where they
// start, the log's whole size and its attempt. An empty log, or a server
// that ignores ranges, answers 200 with all of it.
func (c *Client) logRange(ctx context.Context, r request) (data []byte, start, size int64, attempt int, err error) {
	resp, cancel, err := c.send(ctx, r)
	if err != nil {
		var e *api.Error
		if errors.As(err, &e) && e.Status == http.StatusRequestedRangeNotSatisfiable {
			return nil, 0, 0, 0, nil // nothing there (an older server's empty log)
		}
		return nil, 0, 0, 0, err
	}
	defer cancel()
	defer resp.Body.Close()
	attempt, _ = strconv.Atoi(resp.Header.Get("X-Corral-Attempt"))
	data, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("reading the log: %w", err)
	}
	if resp.StatusCode != http.StatusPartialContent {
		return data, 0, int64(len(data)), attempt, nil
	}
	// Content-Range: bytes A-B/SIZE
	cr := strings.TrimPrefix(resp.Header.Get("Content-Range"), "bytes ")
	span, total, ok := strings.Cut(cr, "/")
	a, _, ok2 := strings.Cut(span, "-")
	start, err1 := strconv.ParseInt(a, 10, 64)
	size, err2 := strconv.ParseInt(total, 10, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil {
		return nil, 0, 0, 0, fmt.Errorf("the server answered a range with Content-Range %q", resp.Header.Get("Content-Range"))
	}
	return data, start, size, attempt, nil
}

// LastLines is an enough function for LogTail: the tail holds n whole
// lines (n+1 line ends, or n when the log ends without one).
func LastLines(n int) func([]byte, bool) bool {
	return func(tail []byte, _ bool) bool {
		ends := bytes.Count(tail, []byte{'\n'})
		if len(tail) > 0 && tail[len(tail)-1] != '\n' {
			ends++ // an unfinished last line counts as one
		}
		return ends > n
	}
}

// TailLines is the last n lines of data (all of it when it has fewer).
func TailLines(data []byte, n int) []byte {
	if n <= 0 {
		return nil
	}
	i := len(data)
	if i > 0 && data[i-1] == '\n' {
		i--
	}
	for ; n > 0; n-- {
		j := bytes.LastIndexByte(data[:i], '\n')
		if j < 0 {
			return data
		}
		i = j
	}
	return data[i+1:]
}
