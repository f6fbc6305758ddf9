package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// A job's stdout and stderr are a pipe, not its log file: a capped copier
// (in the shim for detached jobs, in a goroutine of the in-process agent)
// reads the pipe and appends to the log up to the attempt's cap
// (Config.MaxLogSize, --max-log-size). Past the cap it writes one marker
// line and reads and discards the rest, so the job keeps running and never
// blocks on a full pipe. A write that fails (a full disk) loses that
// output, not the job: the copier goes on reading, and once a write
// succeeds again it first notes how much was lost.

// DefaultMaxLogSize is the per-attempt log cap when none is configured:
// 1 GiB.
const DefaultMaxLogSize = 1 << 30

// copyBuf is the copier's read size.
const copyBuf = 64 << 10

// copyResult is what a capped copy did.
type copyResult struct {
	Written int64 // job output bytes appended to the log (markers not counted)
	Dropped int64 // job output bytes read past the cap and discarded
	Lost    int64 // job output bytes a failed write lost
}

// capMarker is the line written once when output reaches the cap.
func capMarker(limit int64) string {
	return fmt.Sprintf("\ncorral: the log reached its limit of %s (--max-log-size); further output of this attempt is dropped, the job goes on\n", humanBytes(limit))
}

// lostMarker is the line written when output could not be written.
func lostMarker(n int64, err error) string {
	return fmt.Sprintf("\ncorral: %d bytes of output were lost: the log could not be written (%v)\n", n, err)
}

// copyCapped appends what r yields to w until limit bytes of output have
// gone to the log (start is what it held before; limit <= 0: no cap),
// then writes capMarker once and discards the rest. Output lost to a
// failed write counts against the cap too. It returns when r ends (EOF or
// an error): it never stops reading because w failed.
func copyCapped(w io.Writer, r io.Reader, start, limit int64) copyResult {
	var res copyResult
	buf := make([]byte, copyBuf)
	size := start // output given to the log so far, written or lost
	capped := limit > 0 && size >= limit
	var lostErr error // set while output is being lost
	write := func(p []byte) {
		if lostErr != nil {
			// Say what was lost before anything new.
			if _, err := io.WriteString(w, lostMarker(res.Lost, lostErr)); err != nil {
				res.Lost += int64(len(p))
				return
			}
			lostErr = nil
		}
		m, err := w.Write(p)
		res.Written += int64(m)
		if err != nil {
			res.Lost += int64(len(p) - m)
			lostErr = err
		}
	}
	for {
		n, rerr := r.Read(buf)
		switch {
		case n == 0:
		case capped:
			res.Dropped += int64(n)
		case limit > 0 && size+int64(n) > limit:
			keep := limit - size
			write(buf[:keep])
			size = limit
			res.Dropped += int64(n) - keep
			capped = true
			io.WriteString(w, capMarker(limit)) // best effort: the cap holds either way
		default:
			write(buf[:n])
			size += int64(n)
		}
		if rerr != nil {
			if lostErr != nil {
				io.WriteString(w, lostMarker(res.Lost, lostErr))
			}
			return res
		}
	}
}

// openLog opens (creating) an attempt's log for appending, readable by
// its owner only, in a directory only its owner can enter.
func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
}

// logPipe is a job's output pipe and the copier draining it into a log.
// Its methods may be called on nil (no log): they do nothing.
type logPipe struct {
	w    *os.File // the job's stdout and stderr, until started or finish
	done chan copyResult
}

// startLogPipe makes the pipe whose write end is the job's stdout and
// stderr, and starts copying its read end into log (capped at limit, see
// copyCapped). The copier owns log and closes it when the pipe ends.
func startLogPipe(log *os.File, limit int64) (*logPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("job output pipe: %w", err)
	}
	var start int64
	if fi, err := log.Stat(); err == nil {
		start = fi.Size()
	}
	p := &logPipe{w: w, done: make(chan copyResult, 1)}
	go func() {
		res := copyCapped(log, r, start, limit)
		r.Close()
		log.Close()
		p.done <- res
	}()
	return p, nil
}

// openLogPipe opens the log at path and starts its pipe; nil when path
// is empty or the log cannot be opened (the job then runs without one).
func openLogPipe(path string, limit int64) *logPipe {
	if path == "" {
		return nil
	}
	f, err := openLog(path)
	if err != nil {
		return nil
	}
	p, _ := startLogPipe(f, limit)
	return p
}

// printf writes a line of Corral's own into the log, through the pipe
// (before the job has started, or when it could not).
func (p *logPipe) printf(format string, args ...any) {
	if p != nil && p.w != nil {
		fmt.Fprintf(p.w, format, args...)
	}
}

// started closes this process's copy of the write end, once the job holds
// its own: the pipe then ends when the job's processes are gone.
func (p *logPipe) started() {
	if p != nil && p.w != nil {
		p.w.Close()
		p.w = nil
	}
}

// finish closes this process's write end and waits for the copier to
// reach the end of the pipe, at most drainWait; false when it had not (a
// process that escaped the job's group still holds the pipe).
func (p *logPipe) finish() (copyResult, bool) {
	if p == nil {
		return copyResult{}, true
	}
	p.started()
	select {
	case res := <-p.done:
		return res, true
	case <-time.After(drainWait):
		return copyResult{}, false
	}
}

// drainWait is how long, once a job has ended and its process group has
// been killed, its output copier may take to reach the end of the pipe. A
// process that escaped the group and holds the pipe open does not hold the
// job's end up for longer.
const drainWait = 5 * time.Second

// humanBytes writes n in binary units: 1 GiB, 512 MiB, 100 B.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := fmt.Sprintf("%.1f", v)
	if v == float64(int64(v)) {
		s = fmt.Sprintf("%d", int64(v))
	}
	return s + " " + string("KMGTPE"[exp]) + "iB"
}

// logCapped waits for a finished job's output copier (finish) and logs
// what the cap dropped and a full disk lost, if anything.
func (t *tasks) logCapped(spec api.TaskSpec, out *logPipe) {
	res, _ := out.finish()
	if res.Dropped > 0 || res.Lost > 0 {
		t.log.Warn("job output not all logged", "job_id", spec.JobID, "attempt", spec.Attempt, "rank", spec.Rank,
			"written", res.Written, "dropped_past_cap", res.Dropped, "lost_to_write_errors", res.Lost)
	}
}
