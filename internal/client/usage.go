package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/corral-sched/corral/internal/usage"
)

// Usage reads the usage report (GET /usage): grouped by by (empty: user)
// over [since, until) (zero: open).
func (c *Client) Usage(ctx context.Context, by string, since, until time.Time) (usage.Report, error) {
	q := url.Values{}
	if by != "" {
		q.Set("by", by)
	}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	if !until.IsZero() {
		q.Set("until", until.UTC().Format(time.RFC3339))
	}
	var rep usage.Report
	err := c.call(ctx, request{method: http.MethodGet, path: "/usage", query: q}, &rep)
	return rep, err
}

// Prices reads the GPU prices (GET /prices).
func (c *Client) Prices(ctx context.Context) (usage.PriceList, error) {
	var l usage.PriceList
	err := c.call(ctx, request{method: http.MethodGet, path: "/prices"}, &l)
	return l, err
}

// SetPrice sets a GPU model's price per GPU-hour (PUT /prices/{model}).
func (c *Client) SetPrice(ctx context.Context, model string, dollarsPerHour float64) (usage.PriceList, error) {
	p, err := pathID("GPU model", model)
	if err != nil {
		return usage.PriceList{}, err
	}
	var l usage.PriceList
	err = c.call(ctx, request{method: http.MethodPut, path: "/prices/" + p, body: usage.PriceRequest{DollarsPerHour: &dollarsPerHour}}, &l)
	return l, err
}

// UnsetPrice removes a GPU model's price (DELETE /prices/{model}).
func (c *Client) UnsetPrice(ctx context.Context, model string) (usage.PriceList, error) {
	p, err := pathID("GPU model", model)
	if err != nil {
		return usage.PriceList{}, err
	}
	var l usage.PriceList
	err = c.call(ctx, request{method: http.MethodDelete, path: "/prices/" + p}, &l)
	return l, err
}

// Budgets lists budgets with their month-to-date use (GET /budgets).
func (c *Client) Budgets(ctx context.Context) (usage.BudgetList, error) {
	var l usage.BudgetList
	err := c.call(ctx, request{method: http.MethodGet, path: "/budgets"}, &l)
	return l, err
}

func budgetPath(kind, name string) (string, error) {
	k, err := pathID("budget kind", kind)
	if err != nil {
		return "", err
	}
	n, err := pathID("budget name", name)
	if err != nil {
		return "", err
	}
	return "/budgets/" + k + "/" + n, nil
}

// SetBudget sets a user's or project's monthly budget (PUT
// /budgets/{kind}/{name}).
func (c *Client) SetBudget(ctx context.Context, kind, name string, req usage.BudgetRequest) (usage.BudgetStatus, error) {
	p, err := budgetPath(kind, name)
	if err != nil {
		return usage.BudgetStatus{}, err
	}
	var st usage.BudgetStatus
	err = c.call(ctx, request{method: http.MethodPut, path: p, body: req}, &st)
	return st, err
}

// UnsetBudget removes a budget (DELETE /budgets/{kind}/{name}).
func (c *Client) UnsetBudget(ctx context.Context, kind, name string) error {
	p, err := budgetPath(kind, name)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// ReleaseBudget lifts an exhausted budget's action until next month (POST
// /budgets/{kind}/{name}/release).
func (c *Client) ReleaseBudget(ctx context.Context, kind, name string) (usage.BudgetStatus, error) {
	p, err := budgetPath(kind, name)
	if err != nil {
		return usage.BudgetStatus{}, err
	}
	var st usage.BudgetStatus
	err = c.call(ctx, request{method: http.MethodPost, path: p + "/release"}, &st)
	return st, err
}
