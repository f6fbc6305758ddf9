package server

import (
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
