package schema

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/storage"
	"github.com/google/uuid"
)

func openDB(t *testing.T, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(dir, storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestValueRoundTrip(t *testing.T) {
	tu := uuid.MustParse("c232ab00-9414-11ec-b3c8-9f6bdeced846")
	tests := []struct {
		typ bucket.ColumnType
		v   any
	}{
		{bucket.TypeText, "héllo"},
		{bucket.TypeText, ""},
		{bucket.TypeASCII, "plain"},
		{bucket.TypeBlob, []byte{0, 1, 0xff}},
		{bucket.TypeInt, int32(-7)},
		{bucket.TypeBigint, int64(math.MaxInt64)},
		{bucket.TypeVarint, big.NewInt(-123456789)},
		{bucket.TypeTimestamp, time.Date(2026, 11, 22, 10, 0, 0, 5e6, time.UTC)},
		{bucket.TypeBoolean, true},
		{bucket.TypeFloat, float32(1.5)},
		{bucket.TypeDouble, -2.25},
		{bucket.TypeDecimal, bucket.Decimal{Unscaled: big.NewInt(150), Scale: 1}},
		{bucket.TypeTimeUUID, tu},
		{bucket.TypeUUID, uuid.MustParse("123e4567-e89b-42d3-a456-426614174000")},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			enc, err := AppendValue(nil, tt.typ, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			got, typ, err := DecodeTypedValue(enc)
			if err != nil {
				t.Fatal(err)
			}
			if typ != tt.typ {
				t.Fatalf("type %s, want %s", typ, tt.typ)
			}
			again, err := AppendValue(nil, typ, got)
			if err != nil || !bytes.Equal(again, enc) {
				t.Fatalf("re-encoding %v gives %x (%v), want %x", got, again, err, enc)
			}
			if tt.typ != bucket.TypeDecimal && tt.typ != bucket.TypeVarint && !reflect.DeepEqual(got, tt.v) {
				t.Fatalf("decoded %#v, want %#v", got, tt.v)
			}
		})
	}
}

func TestDecodeValueErrors(t *testing.T) {
	for _, in := range [][]byte{nil, {0}, {99, 1}, {byte(bucket.TypeInt), 1, 2}, {byte(bucket.TypeBoolean), 7}} {
		if _, err := DecodeValue(in); !errors.Is(err, ErrCorruptValue) {
			t.Errorf("DecodeValue(%x) = %v, want ErrCorruptValue", in, err)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, seed := range [][]byte{{byte(bucket.TypeText), 'a'}, {byte(bucket.TypeInt), 0x80, 0, 0, 1}, {byte(bucket.TypeDecimal), 0x80}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, typ, err := DecodeTypedValue(in)
		if err != nil {
			if !errors.Is(err, ErrCorruptValue) {
				t.Fatalf("error %v does not wrap ErrCorruptValue", err)
			}
			return
		}
		enc, err := AppendValue(nil, typ, v)
		if err != nil {
			if typ == bucket.TypeText || typ == bucket.TypeASCII {
				return // stored bytes are not re-validated as UTF-8/ASCII on read
			}
			t.Fatalf("decoded %v (%s) does not re-encode: %v", v, typ, err)
		}
		if !bytes.Equal(enc, in) {
			t.Fatalf("decode/encode of %x gives %x", in, enc)
		}
	})
}

var authors = Table{
	Name:         "authors",
	PartitionKey: []Column{{"name", bucket.TypeText}},
	Clustering:   bucket.ClusteringLayout{{Name: "year", Type: bucket.TypeInt, Order: bucket.Desc}, {Name: "title", Type: bucket.TypeText}},
	Columns:      []Column{{"pages", bucket.TypeInt}, {"published", bucket.TypeTimestamp}},
}

func TestInsertErrorsNameTableColumnTypeAndValue(t *testing.T) {
	key := Values{"name": "Tom Clancy", "year": int32(1993), "title": "Without Remorse"}
	with := func(k string, v any) Values {
		row := Values{}
		for kk, vv := range key {
			row[kk] = vv
		}
		row[k] = v
		return row
	}
	tests := []struct {
		name string
		row  Values
		is   error
		want []string
	}{
		{"wrong regular type", with("pages", "many"), ErrInvalidValue, []string{"table authors", "column pages", "want int", `string many`}},
		{"wrong clustering type", with("year", "1993"), ErrInvalidValue, []string{"table authors", `"year"`, "int", "1993"}},
		{"unknown column", with("isbn", "123"), ErrUnknownColumn, []string{"table authors", `"isbn"`, "pages, published"}},
		{"missing clustering", Values{"name": "x", "year": int32(1)}, ErrMissingKey, []string{"table authors", "clustering column title"}},
		{"missing partition", Values{"year": int32(1), "title": "t"}, ErrMissingKey, []string{"partition key column name"}},
		{"empty partition", with("name", ""), ErrInvalidValue, []string{"partition key column name is empty"}},
		{"bad utf8", with("title", "\xff"), ErrInvalidValue, []string{"not valid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b storage.Batch
			err := authors.Insert(&b, tt.row, WriteOptions{TimestampMicros: 1})
			if !errors.Is(err, tt.is) {
				t.Fatalf("got %v, want %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if b.Len() != 0 {
				t.Errorf("a failed insert left %d mutations in the batch", b.Len())
			}
		})
	}
	// Nil fields are unset: no cell, no tombstone.
	var b storage.Batch
	if err := authors.Insert(&b, with("pages", nil), WriteOptions{TimestampMicros: 1}); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 1 {
		t.Fatalf("insert with only a nil column wrote %d cells, want 1 (the row marker)", b.Len())
	}
}

// TestCatalogPersists checks schemas survive a reopen of the store, and
// that adding a column is metadata only: old rows read unchanged.
func TestCatalogPersists(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	cat, err := OpenCatalog(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Create(authors); err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	if err := authors.Insert(&b, Values{"name": "Tom Clancy", "year": int32(1993), "title": "Without Remorse", "pages": int32(639)}, WriteOptions{TimestampMicros: 1}); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(&b); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddColumn("authors", Column{"isbn", bucket.TypeText}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	cat, err = OpenCatalog(db)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.Table("authors")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.Column("isbn"); !ok || len(tbl.Columns) != 3 || tbl.Clustering[0].Order != bucket.Desc {
		t.Fatalf("reloaded schema %+v", tbl)
	}
	partition, _ := tbl.EncodePartition("Tom Clancy")
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: "authors", Partition: partition})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Next() {
		t.Fatalf("row lost: %v", it.Err())
	}
	row, err := tbl.DecodeRow(it.Row())
	if err != nil {
		t.Fatal(err)
	}
	if row.Get("pages") != int32(639) || row.Key[0] != int32(1993) || row.Key[1] != "Without Remorse" {
		t.Fatalf("row %+v", row)
	}
	if _, err := cat.Table("nosuch"); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("unknown table: %v", err)
	}
}

func TestEventRoundTripAndCheckpoint(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	if err := EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	if err := EnsureBuiltinTables(db); err != nil {
		t.Fatalf("second EnsureBuiltinTables: %v", err)
	}
	at := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	id, _ := bucket.NewTimeUUID(at, [8]byte{1, 2, 3})
	e := Event{ID: id, Type: "click", User: "u1", Data: []byte(`{"x":1}`)}
	var b storage.Batch
	if err := PutEvent(&b, &e, 4, 3600, 10); err != nil {
		t.Fatal(err)
	}
	if err := AddCount(&b, "click", at.Add(30*time.Second), 2); err != nil {
		t.Fatal(err)
	}
	PutCheckpoint(&b, "w", 41)
	if err := db.Apply(&b); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	PutCheckpoint(&b, "w", 42)
	if err := db.Apply(&b); err != nil {
		t.Fatal(err)
	}
	if seq, err := ReadCheckpoint(db, "w"); err != nil || seq != 42 {
		t.Fatalf("checkpoint %d %v, want 42", seq, err)
	}
	if seq, err := ReadCheckpoint(db, "other"); err != nil || seq != 0 {
		t.Fatalf("missing checkpoint %d %v, want 0", seq, err)
	}
	pk, _ := bucket.PartitionKeyFor(id, "click", 4)
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: EventsTable, Partition: []byte(pk.String())})
	if err != nil {
		t.Fatal(err)
	}
	if !it.Next() {
		t.Fatalf("event not found in %s: %v", pk, it.Err())
	}
	got, err := DecodeEvent([]byte(pk.String()), it.Row())
	it.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.Type != "click" || got.User != "u1" || got.Author != "" || string(got.Data) != `{"x":1}` || !got.Time().Equal(at) {
		t.Fatalf("decoded %+v", got)
	}
	cp, _ := CountsPartition("click", at)
	it, err = db.Slice(context.Background(), storage.SliceQuery{Table: CountsTable, Partition: cp})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Next() {
		t.Fatal("count not found")
	}
	minute, n, err := DecodeCount(it.Row())
	if err != nil || n != 2 || !minute.Equal(at) {
		t.Fatalf("count %v %d %v", minute, n, err)
	}
}

func TestParseEventTypes(t *testing.T) {
	tests := []struct {
		spec, want, err string
	}{
		{"", "*", ""},
		{"*:ttl=24h,click:ttl=1h:sub=4,view", "*:ttl=24h0m0s,click:ttl=1h0m0s:sub=4,view", ""},
		{"click:ttl=x", "", `ttl "x" is not a positive duration`},
		{"click:sub=-1", "", `sub "-1" is not a number`},
		{"click:foo=1", "", `unknown option "foo"`},
		{"click:ttl", "", "is not key=value"},
		{"Click", "", "invalid event type"},
		{"a,a", "", "listed twice"},
	}
	for _, tt := range tests {
		c, err := ParseEventTypes(tt.spec)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseEventTypes(%q) error %v, want %q", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || c.String() != tt.want {
			t.Errorf("ParseEventTypes(%q) = %q, %v; want %q", tt.spec, c, err, tt.want)
		}
	}
	c, _ := ParseEventTypes("*:ttl=24h,click:sub=4")
	if c.TTLSeconds("click") != 86400 || c.TTLSeconds("view") != 86400 || c.Settings("click").SubPartitions != 4 {
		t.Fatalf("settings: %+v", c)
	}
	var none *EventTypes
	if none.TTLSeconds("x") != int64(DefaultEventTTL/time.Second) || !none.Allowed("x") {
		t.Fatal("nil EventTypes must give defaults")
	}
}
