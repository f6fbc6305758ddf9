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

// NotebookAnswers asks the job's notebook once, through the server's
// proxy: true when the notebook server itself answered (whatever its
// status), with its address under the server's --public-url when the
// server has one (else ""); false when the server answered for it that it
// is not running yet or does not listen yet (409 not_running, 502
// notebook_unreachable). Any other refusal (403, 404, 401) is returned as
// an *api.Error.
func (c *Client) NotebookAnswers(ctx context.Context, jobID string) (answered bool, publicURL string, err error) {
	if c.baseErr != nil {
		return false, "", c.baseErr
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.NotebookURL(jobID), nil)
	if err != nil {
		return false, "", fmt.Errorf("notebook of %s: %w", jobID, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.agent != "" {
		req.Header.Set("User-Agent", c.agent)
	}
	r := request{method: http.MethodGet, path: api.NotebookPath(jobID)}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, "", c.transportError(ctx, c.baseNow(), r, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get(api.NotebookProxiedHeader) != "" {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return true, resp.Header.Get(api.NotebookURLHeader), nil
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return false, "", fmt.Errorf("notebook of %s: the server answered %d without proxying", jobID, resp.StatusCode)
	}
	err = decodeError(resp)
	if e, ok := err.(*api.Error); ok && (e.Code == "not_running" || e.Code == "notebook_unreachable") {
		return false, "", nil
	}
	return false, "", err
}
