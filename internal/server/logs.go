package server

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// logPoll is how often a follower looks for new output between state
// changes; a job's output does not announce itself.
const logPoll = 200 * time.Millisecond

// logs serves a job's output: the current attempt unless ?attempt=N. With
// ?follow=true it streams until that attempt ends.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) error {
	id, err := s.jobID(r)
	if err != nil {
		return err
	}
	_, current, ok := s.o.JobState(id)
	if !ok {
		return api.NotFound("no job %q", id)
	}
	q := r.URL.Query()
	attempt := current
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > current {
			return api.Invalid("attempt", "must be an attempt number between 0 and %d", current)
		}
		attempt = n
	}
	rank := 0
	if v := q.Get("rank"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 4096 {
			return api.Invalid("rank", "must be a rank number (0 for the first node of a gang)")
		}
		rank = n
	}
	follow := q.Get("follow") == "true" || q.Get("follow") == "1"
	offset, err := logOffset(q, follow) // logs_range.go
	if err != nil {
		return err
	}
	path := s.o.RankLogPath(id, attempt, rank)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Corral-Attempt", strconv.Itoa(attempt))
	if !follow {
		return serveLog(w, r, path) // logs_range.go: with byte ranges
	}
	w.Header().Set(logOffsetHeader, strconv.FormatInt(offset, 10))
	return s.follow(w, r, id, attempt, path, offset)
}

// follow streams the log from byte offset until the attempt ends and its
// output is drained, or the caller's token is revoked or expires (streamContext).
func (s *Server) follow(w http.ResponseWriter, r *http.Request, id string, attempt int, path string, offset int64) error {
	ctx, stop := s.streamContext(r)
	defer stop()
	flusher, _ := w.(http.Flusher)
	// A stream that ends because the caller's token stopped working says
	// so in this trailer (token_revoked, token_expired), so a client can
	// tell it from the job's end.
	w.Header().Set("Trailer", streamEndTrailer)
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		if ctx.Err() != nil {
			return endFollow(ctx, w)
		}
		changed := s.o.Changed()
		state, current, _ := s.o.JobState(id)
		done := state.Terminal() || current != attempt
		if f == nil {
			var err error
			if f, err = os.Open(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if f != nil {
				if err := seekLog(f, offset); err != nil {
					return err
				}
			}
		}
		if f != nil {
			if _, err := io.Copy(w, f); err != nil {
				return nil // the client went away
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return endFollow(ctx, w)
		case <-changed:
		case <-tick.C:
		}
	}
}

// streamEndTrailer is the trailer of a followed log that ended because
// the caller's token stopped working.
const streamEndTrailer = "X-Corral-Stream-End"

// endFollow ends a followed log whose context is done, with the reason in
// its trailer when the caller's token stopped working.
func endFollow(ctx context.Context, w http.ResponseWriter) error {
	if reason, ok := credentialEnded(ctx); ok {
		w.Header().Set(streamEndTrailer, reason)
	}
	return nil
}
