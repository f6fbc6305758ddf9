package server

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// logOffsetHeader says from which byte of the attempt's log a followed
// log's stream starts (its offset parameter), so a client can tell a
// server that honours offset from one that ignores it.
const logOffsetHeader = "X-Corral-Log-Offset"

// serveLog answers a job's log that is not followed, with byte ranges
// (http.ServeContent): "Range: bytes=-65536" is its last 64 KiB, answered
// 206 with Content-Range "bytes A-B/SIZE", so a reader of a long log (the
// CLI's --tail, the dashboard) fetches only what it shows and pages back
// from there. Logs of remote agents' jobs are shipped to the server and
// kept at the same path (orchestrator.WriteLog), so ranges serve them
// alike. A log not written yet is an empty 200.
func serveLog(w http.ResponseWriter, r *http.Request, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		w.Header().Set("Accept-Ranges", "bytes")
		w.WriteHeader(http.StatusOK) // no output yet
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		// ServeContent answers a suffix range of an empty file with a
		// malformed Content-Range; an empty log is simply empty.
		w.Header().Set("Accept-Ranges", "bytes")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	// No modification time: a growing log must not answer 304 to a
	// client's If-Modified-Since of the same second.
	http.ServeContent(w, r, "", time.Time{}, f)
	return nil
}

// logOffset reads a followed log's offset parameter: the byte of the
// attempt's log its stream starts at (0: the beginning).
func logOffset(q url.Values, follow bool) (int64, error) {
	v := q.Get("offset")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, api.Invalid("offset", "must be a byte offset, 0 or more")
	}
	if !follow {
		return 0, api.Invalid("offset", "goes with follow=true; without it, ask for bytes with a Range header (Range: bytes=N-)")
	}
	return n, nil
}

// seekLog moves a newly opened followed log to offset.
func seekLog(f *os.File, offset int64) error {
	if offset == 0 {
		return nil
	}
	_, err := f.Seek(offset, io.SeekStart)
	return err
}
