package reader

// Data-driven slice tests. Each file under testdata/slices replays one of
// the data-modeling literature's examples as a script of commands; a
// command followed by a line "----" has its expected output on the lines
// after it, up to a blank line. Run with -rewrite to regenerate the
// expected outputs (then read the diff).
//
//	create NAME pk=COL:TYPE[,...] [ck=COL:TYPE:asc|desc[,...]] [cols=COL:TYPE[,...]] [ttl=SECONDS] [optional]
//	insert TABLE [ttl=SECONDS] COL=LITERAL ...        INSERT: writes a row marker
//	update TABLE COL=LITERAL ...                      UPDATE: no row marker
//	delete TABLE COL=LITERAL ...                      delete the row with this key
//	flush                                             flush memtables to SSTables
//	advance DURATION                                  move the clock forward
//	query TABLE pk=LITERAL[,...] [COL=LITERAL ...] [COL>=|>|<=|<LITERAL ...]
//	      [reverse] [limit=N] [next] [trace]          print rows, next page, trace
//
// Literals are CQL's (schema.ParseLiteral), plus tu(RFC3339,N) for the
// timeuuid of that time with node byte N, printed back the same way. The
// clock starts at 2026-11-22T10:00:00Z; every write gets a fresh timestamp.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata/slices")

func TestSlicesDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/slices/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScript(t, file) })
	}
}

type script struct {
	t       *testing.T
	clock   *fixedClock
	db      *storage.DB
	cat     *catalog.Catalog
	r       *Reader
	micros  int64
	lastTok string
}

func runScript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fixedClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	s := &script{t: t, clock: clock, db: openStore(t, clock)}
	if s.cat, err = catalog.Open(s.db); err != nil {
		t.Fatal(err)
	}
	if s.r, err = New(s.db, Options{Catalog: s.cat, Now: clock.Now}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out = append(out, line)
		cmd := strings.TrimSpace(line)
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		got := s.run(i+1, cmd)
		if i+1 < len(lines) && lines[i+1] == "----" {
			var want []string
			j := i + 2
			for ; j < len(lines) && lines[j] != ""; j++ {
				want = append(want, lines[j])
			}
			if !*rewrite && strings.Join(want, "\n") != strings.Join(got, "\n") {
				t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, i+1, cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			out = append(out, "----")
			out = append(out, got...)
			i = j - 1
		} else if len(got) > 0 {
			t.Errorf("%s:%d: %s: unexpected output (add a ---- block):\n%s", file, i+1, cmd, strings.Join(got, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run executes one command and returns its output lines; errors are output
// too ("error: ..."), so scripts can check them.
func (s *script) run(lineNo int, cmd string) []string {
	words := splitWords(cmd)
	var out []string
	var err error
	switch words[0] {
	case "create":
		err = s.create(words[1:])
	case "insert", "update", "delete":
		err = s.write(words[0], words[1:])
	case "flush":
		err = s.db.Flush()
	case "advance":
		var d time.Duration
		if d, err = time.ParseDuration(words[1]); err == nil {
			s.clock.Set(s.clock.Now().Add(d))
		}
	case "query":
		out, err = s.query(words[1:])
	default:
		s.t.Fatalf("line %d: unknown command %q", lineNo, words[0])
	}
	if err != nil {
		return append(out, "error: "+err.Error())
	}
	return out
}

// splitWords splits on spaces outside 'quotes'.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

func (s *script) create(args []string) error {
	tbl := schema.Table{Name: args[0]}
	parseCols := func(spec string) ([]bucket.ClusteringColumn, error) {
		var cols []bucket.ClusteringColumn
		for _, c := range strings.Split(spec, ",") {
			parts := strings.Split(c, ":")
			typ, err := bucket.ParseColumnType(parts[1])
			if err != nil {
				return nil, err
			}
			col := bucket.ClusteringColumn{Name: parts[0], Type: typ}
			if len(parts) > 2 && parts[2] == "desc" {
				col.Order = bucket.Desc
			}
			cols = append(cols, col)
		}
		return cols, nil
	}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "pk", "cols":
			cols, err := parseCols(v)
			if err != nil {
				return err
			}
			for _, c := range cols {
				if k == "pk" {
					tbl.PartitionKey = append(tbl.PartitionKey, schema.Column{Name: c.Name, Type: c.Type})
				} else {
					tbl.Columns = append(tbl.Columns, schema.Column{Name: c.Name, Type: c.Type})
				}
			}
		case "ck":
			cols, err := parseCols(v)
			if err != nil {
				return err
			}
			tbl.Clustering = cols
		case "ttl":
			n, _ := strconv.Atoi(v)
			tbl.DefaultTTLSeconds = int32(n)
		case "optional":
			tbl.SchemaOptional = true
		default:
			return fmt.Errorf("create: unknown option %q", a)
		}
	}
	return s.cat.Create(tbl)
}

// columnType returns the type of a key or regular column of t.
func columnType(t *schema.Table, name string) (bucket.ColumnType, bool) {
	for _, c := range t.PartitionKey {
		if c.Name == name {
			return c.Type, true
		}
	}
	for _, c := range t.Clustering {
		if c.Name == name {
			return c.Type, true
		}
	}
	c, ok := t.Column(name)
	return c.Type, ok
}

func parseValue(t *schema.Table, col, lit string) (any, error) {
	if strings.HasPrefix(lit, "tu(") {
		ts, node, _ := strings.Cut(strings.TrimSuffix(lit[3:], ")"), ",")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return nil, err
		}
		n, _ := strconv.Atoi(node)
		return bucket.NewTimeUUID(at, [8]byte{7: byte(n)})
	}
	typ, ok := columnType(t, col)
	if !ok {
		if t.SchemaOptional && strings.HasPrefix(lit, "'") {
			typ = bucket.TypeText
		} else {
			return lit, nil // let the schema report the unknown column
		}
	}
	return schema.ParseLiteral(typ, lit)
}

// splitOutsideParens splits s on commas that are not inside tu(...).
func splitOutsideParens(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func formatValue(v any) string {
	if u, ok := v.(uuid.UUID); ok && u.Version() == 1 {
		at, _ := bucket.TimeOf(u)
		return fmt.Sprintf("tu(%s,%d)", at.Format(time.RFC3339Nano), u[15])
	}
	return schema.FormatValue(v)
}

func (s *script) write(kind string, args []string) error {
	t, err := s.cat.Table(args[0])
	if err != nil {
		return err
	}
	s.micros = max(s.micros+1, s.clock.Now().UnixMicro())
	o := schema.WriteOptions{TimestampMicros: s.micros}
	row := schema.Values{}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		if k == "ttl" {
			n, _ := strconv.Atoi(v)
			o.TTLSeconds = int32(n)
			continue
		}
		if row[k], err = parseValue(t, k, v); err != nil {
			return err
		}
	}
	var b storage.Batch
	switch kind {
	case "insert":
		err = catalog.Insert(&b, t, row, o)
	case "update":
		err = catalog.Update(&b, t, row, o)
	case "delete":
		err = catalog.DeleteRow(&b, t, row, o.TimestampMicros)
	}
	if err != nil {
		return err
	}
	return s.db.Apply(context.Background(), &b)
}

func (s *script) query(args []string) ([]string, error) {
	t, err := s.cat.Table(args[0])
	if err != nil {
		return nil, err
	}
	q := SliceQuery{Table: t.Name}
	for _, a := range args[1:] {
		switch {
		case a == "reverse":
			q.Reverse = true
		case a == "trace":
			q.Trace = true
		case a == "next":
			q.PageToken = s.lastTok
		case strings.HasPrefix(a, "limit="):
			q.Limit, _ = strconv.Atoi(a[len("limit="):])
		case strings.HasPrefix(a, "pk="):
			for _, lit := range splitOutsideParens(a[3:]) {
				v, err := parseValue(t, t.PartitionKey[len(q.Partition)].Name, lit)
				if err != nil {
					return nil, err
				}
				q.Partition = append(q.Partition, v)
			}
		default:
			i := strings.IndexAny(a, "<>=")
			col, rest := a[:i], a[i:]
			op := strings.TrimRight(rest[:min(2, len(rest))], "'-0123456789t")
			lit := rest[len(op):]
			v, err := parseValue(t, col, lit)
			if err != nil {
				return nil, err
			}
			switch op {
			case "=":
				q.Equal = append(q.Equal, v)
			case ">=", ">":
				q.Lower = &ValueBound{Value: v, Inclusive: op == ">="}
			case "<=", "<":
				q.Upper = &ValueBound{Value: v, Inclusive: op == "<="}
			default:
				return nil, fmt.Errorf("bad condition %q", a)
			}
		}
	}
	page, err := s.r.Slice(context.Background(), q)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, row := range page.Rows {
		var parts []string
		for _, k := range row.Key {
			parts = append(parts, formatValue(k))
		}
		var cells []string
		for _, c := range row.Cells {
			cells = append(cells, c.Name+"="+formatValue(c.Value))
		}
		sort.Strings(cells)
		if len(cells) > 0 {
			parts = append(parts, strings.Join(cells, " "))
		}
		out = append(out, strings.Join(parts, " | "))
	}
	if len(page.Rows) == 0 {
		out = append(out, "(no rows)")
	}
	s.lastTok = page.NextPage
	if page.NextPage != "" {
		out = append(out, "next page")
	}
	if page.Trace != nil {
		out = append(out, "trace: "+page.Trace.String())
	}
	return out, nil
}
