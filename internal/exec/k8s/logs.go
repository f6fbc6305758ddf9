package k8s

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-sched/corral/internal/exec/k8s/pod"
)

// rankLog copies one pod's log (the pod log API) into the rank's log file
// in Corral's log store. written counts the bytes of the container's log
// already stored: each stream from the API server starts at the
// container's first byte, and what was stored is skipped.
type rankLog struct {
	path  string
	limit int64 // the server's --max-log-size; 0: none

	mu        sync.Mutex // one stream writes at a time
	written   int64
	capped    bool
	following bool
	cancel    context.CancelFunc
	done      chan struct{}
	clean     bool // the follow stream ended on its own (the container's output is complete)
}

func newRankLog(path string, limit int64) *rankLog { return &rankLog{path: path, limit: limit} }

// follow streams the pod's log (follow=true) into rl in the background,
// once per rank.
func (e *Executor) follow(k key, ns, name string, rl *rankLog) {
	rl.mu.Lock()
	if rl.following || rl.path == "" {
		rl.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	rl.following, rl.cancel, rl.done = true, cancel, make(chan struct{})
	rl.mu.Unlock()
	go func() {
		defer close(rl.done)
		for {
			err := e.stream(ctx, ns, name, true, rl)
			rl.mu.Lock()
			rl.clean = err == nil
			rl.mu.Unlock()
			if err == nil || ctx.Err() != nil {
				return // the container's output ended, or flush took over
			}
			// Broken (the API server went away): follow again, skipping
			// what is stored.
			e.log.Debug("pod log stream broken; following again", "job_id", k.job, "pod", name, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(e.retryWait()):
			}
		}
	}()
}

// flush makes the rank's stored log complete once its container ended:
// the follow stream ends by itself when the container's output does
// (given a few seconds), then the whole log is read once more and what is
// new is appended (a stream that broke, or stopped early, misses the
// end). A pod already removed (the kubelet removes a deleted pod once its
// container ended) leaves what the follow stream got.
func (e *Executor) flush(ctx context.Context, k key, ns, name string, rl *rankLog) {
	if rl.path == "" {
		return
	}
	rl.mu.Lock()
	following, done, cancel := rl.following, rl.done, rl.cancel
	rl.mu.Unlock()
	clean := false
	if following {
		select {
		case <-done:
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
		}
		cancel()
		<-done
		rl.mu.Lock()
		clean = rl.clean
		rl.mu.Unlock()
	}
	if err := e.stream(ctx, ns, name, false, rl); err != nil {
		if clean {
			e.log.Debug("pod log not read again; the follow stream had it all", "job_id", k.job, "pod", name, "err", err)
			return
		}
		e.log.Warn("pod log not read", "job_id", k.job, "pod", name, "err", err)
	}
}

// stream reads the pod's log from its first byte and appends what rl has
// not stored yet.
func (e *Executor) stream(ctx context.Context, ns, name string, follow bool, rl *rankLog) error {
	var rc io.ReadCloser
	err := e.call(func() (err error) {
		rc, err = e.cfg.Client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: pod.Container, Follow: follow}).Stream(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("k8s: logs of pod %s/%s: %w", ns, name, err)
	}
	defer rc.Close()
	if err := os.MkdirAll(filepath.Dir(rl.path), 0o700); err != nil {
		return fmt.Errorf("k8s: log store: %w", err)
	}
	f, err := os.OpenFile(rl.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("k8s: log store: %w", err)
	}
	defer f.Close()
	var pos int64
	buf := make([]byte, 32<<10)
	for {
		n, rerr := rc.Read(buf)
		if n > 0 {
			if werr := rl.append(f, buf[:n], pos); werr != nil {
				return werr
			}
			pos += int64(n)
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("k8s: logs of pod %s/%s: %w", ns, name, rerr)
		}
	}
}

// append stores the part of b (which starts at offset pos of the
// container's log) that is not stored yet, within the size limit.
func (rl *rankLog) append(f *os.File, b []byte, pos int64) error {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if end := pos + int64(len(b)); end <= rl.written {
		return nil
	} else if pos < rl.written {
		b = b[rl.written-pos:]
	}
	rl.written += int64(len(b))
	if rl.capped {
		return nil
	}
	if rl.limit > 0 {
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("k8s: log store: %w", err)
		}
		if st.Size()+int64(len(b)) > rl.limit {
			b = append(b[:max(rl.limit-st.Size(), 0):max(rl.limit-st.Size(), 0)],
				fmt.Sprintf("\ncorral: the stored log reached its limit of %d bytes (--max-log-size of the server); further output of this attempt is dropped\n", rl.limit)...)
			rl.capped = true
		}
	}
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("k8s: log store: %w", err)
	}
	return nil
}
