package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/client"
)

// jobPaging is corral jobs' paging flags (docs/history.md): a page at a
// time (--limit, --cursor) or every page (--all), and --until.
type jobPaging struct {
	all    bool
	cursor string
	until  string
}

func (p *jobPaging) flags(fl *pflag.FlagSet) {
	fl.BoolVar(&p.all, "all", false, "every matching job: fetch page after page (--limit jobs each)")
	fl.StringVar(&p.cursor, "cursor", "", "the page after this cursor (the next_cursor a page ended with)")
	fl.StringVar(&p.until, "until", "", "only jobs submitted before: an age (1h, 2d) or a time (RFC 3339, 2006-01-02)")
}

// list fetches the page f (with the flags' cursor and until), or every
// page with --all.
func (p *jobPaging) list(ctx context.Context, c *cli, cl *client.Client, f client.JobFilter) (api.JobList, error) {
	f.Cursor = p.cursor
	if p.until != "" {
		t, err := parseSince(p.until, c.now())
		if err != nil {
			return api.JobList{}, usagef("--until: %w", err)
		}
		f.Until = t
	}
	if p.all {
		return cl.JobsAll(ctx, f)
	}
	return cl.Jobs(ctx, f)
}

// footer says, under a table, how to get the next page.
func (p *jobPaging) footer(w io.Writer, l api.JobList) error {
	if l.NextCursor == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "more jobs match: corral jobs ... --cursor %s (or --all)\n", l.NextCursor)
	return err
}

// queueFooter says, under the queue's table, that it goes on.
func queueFooter(w io.Writer, q api.QueueResponse) error {
	if q.NextCursor == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "the first %d queued jobs of more (%d queued in all): corral queue --all lists them all\n", len(q.QueuedJobs), q.Statistics.TotalQueued)
	return err
}
