package main

import (
	"context"
	"io"

	"github.com/corral-sched/corral/internal/client"
)

// callAndPrint is most commands' whole run: a client for the server the
// global flags name, one call, and its answer printed (as JSON with
// -o json, else by table).
func callAndPrint[T any](c *cli, ctx context.Context, call func(context.Context, *client.Client) (T, error), table func(io.Writer, T) error) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	v, err := call(ctx, cl)
	if err != nil {
		return err
	}
	return c.emit(v, func(w io.Writer) error { return table(w, v) })
}
