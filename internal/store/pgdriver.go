package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
)

// openPostgres opens a database/sql handle on PostgreSQL through pgx whose
// every statement is rewritten from the store's portable SQL (dialect.go)
// on its way to the server: code holding a *sql.DB or *sql.Tx of a store
// writes ? placeholders and SQLite's spelling, on either database.
func openPostgres(dsn string) (*sql.DB, error) {
	dc, ok := stdlib.GetDefaultDriver().(driver.DriverContext)
	if !ok {
		return nil, errors.New("the pgx driver has no connector")
	}
	c, err := dc.OpenConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return sql.OpenDB(pgConnector{c}), nil
}

// pgConnector hands out rewriting connections.
type pgConnector struct{ base driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return pgConn{conn}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.base.Driver() }

// pgConn is a pgx connection whose statements are rewritten by pgRewrite.
// It forwards the interfaces database/sql looks for on pgx's connection.
type pgConn struct{ base driver.Conn }

func (c pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.base.Prepare(pgRewrite(query))
}

func (c pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.base.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, pgRewrite(query))
	}
	return c.base.Prepare(pgRewrite(query))
}

func (c pgConn) Close() error { return c.base.Close() }

func (c pgConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.base.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.base.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return e.ExecContext(ctx, pgRewrite(query), args)
}

func (c pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.base.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return q.QueryContext(ctx, pgRewrite(query), args)
}

func (c pgConn) Ping(ctx context.Context) error {
	if p, ok := c.base.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c pgConn) ResetSession(ctx context.Context) error {
	if r, ok := c.base.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c pgConn) IsValid() bool {
	if v, ok := c.base.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
