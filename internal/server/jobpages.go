package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// maxCursor bounds a job cursor's length (a job id).
const maxCursor = 200

// untilCursor reads GET /jobs' until (an RFC 3339 time or a duration back
// from now, like since) and cursor (the next_cursor of the last page: a
// job id) parameters (docs/history.md).
func untilCursor(q url.Values) (until time.Time, cursor string, err error) {
	if v := q.Get("until"); v != "" {
		if until, err = parseSince(v, time.Now()); err != nil {
			return until, "", api.Invalid("until", "%s", err.Error())
		}
	}
	cursor = q.Get("cursor")
	if len(cursor) > maxCursor || strings.ContainsAny(cursor, "\x00\n\r") {
		return until, "", api.Invalid("cursor", "is not a cursor this server gave (next_cursor)")
	}
	return until, cursor, nil
}

// pageParams reads GET /queue's limit (1 to 100000; def when absent) and
// cursor (the next_cursor of the last page: how many jobs came before).
func pageParams(q url.Values, def int) (limit int, cursor string, err error) {
	limit = def
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return 0, "", api.Invalid("limit", "must be an integer between 1 and 100000")
		}
		limit = n
	}
	cursor = q.Get("cursor")
	if cursor != "" {
		if n, err := strconv.Atoi(cursor); err != nil || n < 0 {
			return 0, "", api.Invalid("cursor", "is not a cursor this server gave (next_cursor)")
		}
	}
	return limit, cursor, nil
}

// writeJobList writes GET /jobs's answer as writeJSON would, a job at a
// time: the encoder would build the whole page in one buffer first (issue
// 24: 396 MB of JSON per listing), this holds one job's at most.
func writeJobList(w http.ResponseWriter, l api.JobList) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	put := func(prefix string, v any, indent string) error {
		bw.WriteString(prefix)
		b, err := json.MarshalIndent(v, indent, "  ")
		if err != nil {
			return err
		}
		_, err = bw.Write(b)
		return err
	}
	bw.WriteString("{\n  \"jobs\": [")
	for i := range l.Jobs {
		sep := ",\n    "
		if i == 0 {
			sep = "\n    "
		}
		if err := put(sep, &l.Jobs[i], "    "); err != nil {
			return err
		}
	}
	if len(l.Jobs) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]")
	if len(l.Arrays) > 0 {
		if err := put(",\n  \"arrays\": ", l.Arrays, "  "); err != nil {
			return err
		}
	}
	if l.NextCursor != "" {
		if err := put(",\n  \"next_cursor\": ", l.NextCursor, "  "); err != nil {
			return err
		}
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}
