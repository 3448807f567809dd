package haproxy

import (
	"encoding/csv"
	"fmt"
	"strings"
)

// statTable is parsed `show stat` CSV output.
type statTable struct {
	cols map[string]int
	rows [][]string
}

// get returns a row's value in the named column, "" if there is no such column.
func (t statTable) get(row []string, col string) string {
	if i, ok := t.cols[col]; ok {
		return row[i]
	}
	return ""
}

// parseStat parses `show stat` output: a "# pxname,svname,..." header, then rows.
func parseStat(out string) (statTable, error) {
	if !strings.HasPrefix(out, "# ") {
		return statTable{}, fmt.Errorf("%w: show stat: no header in %.80q", ErrBadReply, out)
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "# ")))
	r.FieldsPerRecord = 0 // every row as wide as the header: a cut row is an error
	r.ReuseRecord = false
	recs, err := r.ReadAll()
	if err != nil {
		return statTable{}, fmt.Errorf("%w: show stat: %w", ErrBadReply, err)
	}
	if len(recs) == 0 {
		return statTable{}, fmt.Errorf("%w: show stat: empty header in %.80q", ErrBadReply, out)
	}
	t := statTable{cols: make(map[string]int, len(recs[0])), rows: recs[1:]}
	for i, h := range recs[0] {
		t.cols[h] = i
	}
	for _, c := range []string{"pxname", "svname"} {
		if _, ok := t.cols[c]; !ok {
			return statTable{}, fmt.Errorf("%w: show stat: no %s column", ErrBadReply, c)
		}
	}
	return t, nil
}

// backendRow returns the BACKEND row of backend, if the table has one.
func (t statTable) backendRow(backend string) ([]string, bool) {
	for _, r := range t.rows {
		if t.get(r, "pxname") == backend && t.get(r, "svname") == "BACKEND" {
			return r, true
		}
	}
	return nil, false
}
