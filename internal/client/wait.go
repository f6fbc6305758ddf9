package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// DefaultRetry is how long WaitJob and FollowLogs keep reconnecting to a
// server that went away (a restart) before they give up.
const DefaultRetry = 2 * time.Minute

// Polling of WaitJob: the first look comes after waitPollMin, then the
// interval grows by half each time up to waitPollMax, so that a long job
// costs one GET every few seconds, never a busy loop.
const (
	waitPollMin = 250 * time.Millisecond
	waitPollMax = 5 * time.Second
)

// Reconnecting: the pause after a failure starts at retryPauseMin and
// doubles up to retryPauseMax.
const (
	retryPauseMin = 250 * time.Millisecond
	retryPauseMax = 5 * time.Second
)

// WaitOptions tunes WaitJob and FollowLogs.
type WaitOptions struct {
	// Retry is how long to keep reconnecting after the server stops
	// answering (refused, reset, EOF, 502/503/504), counted from the last
	// answer; zero gives up at the first such failure.
	Retry time.Duration
	// OnRetry, when set, is told of the first failure of each outage that
	// will be retried (not of every try, so that it can print a line).
	OnRetry func(err error)
}

// Transient reports whether err is the kind of failure a server restart
// causes: the server could not be reached, the connection broke, or it
// answered 502, 503 or 504. Such a request may succeed if tried again.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Status == http.StatusBadGateway || ae.Status == http.StatusServiceUnavailable ||
			ae.Status == http.StatusGatewayTimeout
	}
	return errors.Is(err, ErrUnreachable) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// retrier paces reconnects: it allows them while the last answer is at
// most retry old.
type retrier struct {
	o      WaitOptions
	lastOK time.Time
	pause  time.Duration // zero while the server answers
}

func newRetrier(o WaitOptions) *retrier { return &retrier{o: o, lastOK: time.Now()} }

// ok records an answer from the server.
func (r *retrier) ok() { r.lastOK, r.pause = time.Now(), 0 }

// again waits before another try after err and returns nil, or returns
// err when it is not transient, the retry window is spent, or ctx ends.
func (r *retrier) again(ctx context.Context, err error) error {
	if !Transient(err) || ctx.Err() != nil {
		return err
	}
	if time.Since(r.lastOK) > r.o.Retry {
		if r.o.Retry > 0 {
			return fmt.Errorf("gave up reconnecting after %s (--retry): %w", r.o.Retry, err)
		}
		return err
	}
	if r.pause == 0 {
		r.pause = retryPauseMin
		if r.o.OnRetry != nil {
			r.o.OnRetry(err)
		}
	} else if r.pause *= 2; r.pause > retryPauseMax {
		r.pause = retryPauseMax
	}
	t := time.NewTimer(r.pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w (while reconnecting after: %v)", ctx.Err(), err)
	case <-t.C:
		return nil
	}
}

// jobRetrying is Job, tried again through a server restart.
func (c *Client) jobRetrying(ctx context.Context, id string, r *retrier) (api.Job, error) {
	for {
		job, err := c.Job(ctx, id)
		if err == nil {
			r.ok()
			return job, nil
		}
		if err := r.again(ctx, err); err != nil {
			return api.Job{}, err
		}
	}
}

// WaitJob blocks until job id is completed, failed or canceled and returns
// it. It polls GET /jobs/{id}, every 250ms at first and less often as the
// wait goes on (at most every 5s), and rides out a server restart for up to
// o.Retry.
func (c *Client) WaitJob(ctx context.Context, id string, o WaitOptions) (api.Job, error) {
	r := newRetrier(o)
	poll := waitPollMin
	for {
		job, err := c.jobRetrying(ctx, id, r)
		if err != nil || job.State.Terminal() {
			return job, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return job, fmt.Errorf("waiting for job %s: %w", id, ctx.Err())
		case <-t.C:
		}
		if poll += poll / 2; poll > waitPollMax {
			poll = waitPollMax
		}
	}
}

// FollowLogs streams a job's output to w until the job ends, and returns
// the job as it ended. It follows each new attempt of a requeued job in
// turn (unless o.Attempt pins one: then it returns when that attempt ends,
// with the job as it is then). When the server goes away mid-stream it
// reconnects for up to wo.Retry and resumes the same attempt where it
// broke off: the logs API has no offset, so the bytes already written are
// read again and skipped, never written twice.
//
// A stream the server ends because the token was revoked or expired
// returns a 401 *api.Error saying so.
func (c *Client) FollowLogs(ctx context.Context, id string, o LogsOptions, wo WaitOptions, w io.Writer) (api.Job, error) {
	p, err := pathID("job", id)
	if err != nil {
		return api.Job{}, err
	}
	r := newRetrier(wo)
	pinned := o.Attempt != nil
	attempt := -1 // the API's attempt number being followed; -1: the current one
	if pinned {
		attempt = *o.Attempt // counted from 0, as $CORRAL_ATTEMPT
	}
	var written int64 // bytes of attempt already written to w (or skipped: o.Offset)
	switch {          // bytes already printed (a tail read first: LogTail)
	case pinned:
		written = o.Offset
	case o.From != nil:
		attempt, written = *o.From, o.Offset
	}
	for {
		lo := LogsOptions{Follow: true, Rank: o.Rank, Offset: written}
		if attempt >= 0 {
			lo.Attempt = &attempt
		}
		resp, cancel, err := c.send(ctx, logsRequest(p, lo))
		if err != nil {
			if err := r.again(ctx, err); err != nil {
				return api.Job{}, err
			}
			continue
		}
		r.ok()
		if got, err := strconv.Atoi(resp.Header.Get("X-Corral-Attempt")); err == nil && got != attempt {
			attempt, written = got, 0
		}
		// A server that honours offset says so; an older one sends the
		// log from its start, and what was written is skipped.
		from := int64(0)
		if got, err := strconv.ParseInt(resp.Header.Get("X-Corral-Log-Offset"), 10, 64); err == nil && got == lo.Offset {
			from = lo.Offset
		}
		sw := &skipWriter{w: flushWriter{w}, skip: max(written-from, 0)}
		n, err := io.Copy(sw, resp.Body)
		resp.Body.Close()
		cancel()
		if from+n > written {
			written = from + n
		}
		if sw.err != nil {
			return api.Job{}, fmt.Errorf("logs of job %s: writing the output: %w", id, sw.err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return api.Job{}, fmt.Errorf("logs of job %s: %w", id, ctx.Err())
			}
			err = fmt.Errorf("logs of job %s: the stream broke off: %w", id, err)
			if err := r.again(ctx, err); err != nil {
				return api.Job{}, err
			}
			continue
		}
		if err := streamEnd(id, resp.Trailer.Get("X-Corral-Stream-End")); err != nil {
			return api.Job{}, err
		}
		// The stream ended: the attempt ended, or the server shut down.
		job, err := c.jobRetrying(ctx, id, r)
		if err != nil {
			return job, err
		}
		if attempt < 0 {
			attempt = job.RetryCount // no X-Corral-Attempt: it was the current one
		}
		switch {
		case pinned && (job.State.Terminal() || job.RetryCount != attempt):
			return job, nil // the pinned attempt is over
		case job.RetryCount != attempt:
			attempt, written = attempt+1, 0 // the job was requeued: its next attempt, from the start
		case job.State.Terminal():
			return job, nil // the stream drains the last attempt's output before it ends
		}
		// Otherwise the same attempt still runs (the server shut down):
		// resume it.
	}
}

// streamEnd turns the X-Corral-Stream-End trailer of a followed log into
// the error it stands for; empty means the stream ended normally.
func streamEnd(id, why string) error {
	switch why {
	case "":
		return nil
	case "token_revoked":
		return api.Unauthorized(why, "logs of job "+id+": the stream ended: the token was revoked")
	case "token_expired":
		return api.Unauthorized(why, "logs of job "+id+": the stream ended: the token has expired")
	default:
		return fmt.Errorf("logs of job %s: the stream ended early: %s", id, why)
	}
}

// skipWriter drops the first skip bytes written to it and passes on the
// rest; it reports every byte as written.
type skipWriter struct {
	w    io.Writer
	skip int64
	err  error // the first error of w, so that it is not taken for the stream's
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip >= int64(n) {
		s.skip -= int64(n)
		return n, nil
	}
	rest := p[s.skip:]
	s.skip = 0
	if _, err := s.w.Write(rest); err != nil {
		s.err = err
		return 0, err
	}
	return n, nil
}
