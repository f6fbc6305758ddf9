package cmdkit

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Table writes tab-separated rows as aligned columns.
type Table struct {
	tw *tabwriter.Writer
}

// NewTable starts a table on w with the given column headers (none: no
// header row).
func NewTable(w io.Writer, headers ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(headers) > 0 {
		t.Row(headers...)
	}
	return t
}

// Row adds one row; cells are cleaned of tabs and newlines.
func (t *Table) Row(cells ...string) {
	for i, s := range cells {
		cells[i] = Cell(s)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// Flush writes the table out.
func (t *Table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	return nil
}

// Cell makes s safe for one table cell: no tabs or line breaks, "-" when
// empty.
func Cell(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
