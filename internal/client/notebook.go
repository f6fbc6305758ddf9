package client

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/corral-sched/corral/internal/api"
)

// NotebookURL is the address of a job's notebook through this client's
// server.
func (c *Client) NotebookURL(jobID string) string { return c.baseNow() + api.NotebookPath(jobID) }

// NotebookProbe is what one look at a job's notebook through the
// server's proxy found.
type NotebookProbe struct {
	// Ready: the notebook server itself answered its proxy path with a
	// success or a redirect (a login page, Jupyter's /lab): it serves
	// under /proxy/JOB/.
	Ready bool
	// Status is the notebook server's own status when it answered (0:
	// the server answered for it that it is not running or does not
	// listen yet). A 404 means it listens but serves nothing under the
	// proxy's path prefix (yet, or ever: see docs/interactive.md).
	Status int
	// PublicURL is its address under the server's --public-url when the
	// server has one, else "".
	PublicURL string
}

// NotebookAnswers asks the job's notebook once, through the server's
// proxy, without following redirects (a redirect is an answer). The
// server's own "not yet" (409 not_running, 502 notebook_unreachable) is a
// probe that is not ready; any other refusal of the server (403, 404,
// 401) is returned as an *api.Error.
func (c *Client) NotebookAnswers(ctx context.Context, jobID string) (NotebookProbe, error) {
	if c.baseErr != nil {
		return NotebookProbe{}, c.baseErr
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.NotebookURL(jobID), nil)
	if err != nil {
		return NotebookProbe{}, fmt.Errorf("notebook of %s: %w", jobID, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.agent != "" {
		req.Header.Set("User-Agent", c.agent)
	}
	r := request{method: http.MethodGet, path: api.NotebookPath(jobID)}
	hc := *c.http // the same transport, but a redirect is the notebook's answer
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return NotebookProbe{}, c.transportError(ctx, c.baseNow(), r, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get(api.NotebookProxiedHeader) != "" {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		p := NotebookProbe{Status: resp.StatusCode}
		if resp.StatusCode < 400 {
			p.Ready, p.PublicURL = true, resp.Header.Get(api.NotebookURLHeader)
		}
		return p, nil
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return NotebookProbe{}, fmt.Errorf("notebook of %s: the server answered %d without proxying", jobID, resp.StatusCode)
	}
	if resp.StatusCode == http.StatusTemporaryRedirect {
		// A unique prefix of the id: the server names the full id's path.
		return NotebookProbe{}, fmt.Errorf("notebook of %s: give the job's full id (the server redirects to %s)", jobID, resp.Header.Get("Location"))
	}
	err = decodeError(resp)
	if e, ok := err.(*api.Error); ok && (e.Code == "not_running" || e.Code == "notebook_unreachable") {
		return NotebookProbe{}, nil
	}
	return NotebookProbe{}, err
}
