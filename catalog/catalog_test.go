package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

func openDB(t *testing.T, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(dir, storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return db
}

var authors = schema.Table{
	Name:         "authors",
	PartitionKey: []schema.Column{{Name: "name", Type: bucket.TypeText}},
	Clustering:   bucket.ClusteringLayout{{Name: "year", Type: bucket.TypeInt, Order: bucket.Desc}, {Name: "title", Type: bucket.TypeText}},
	Columns:      []schema.Column{{Name: "pages", Type: bucket.TypeInt}, {Name: "published", Type: bucket.TypeTimestamp}},
}

func TestInsertErrorsNameTableColumnTypeAndValue(t *testing.T) {
	key := schema.Values{"name": "Tom Clancy", "year": int32(1993), "title": "Without Remorse"}
	with := func(k string, v any) schema.Values {
		row := schema.Values{}
		for kk, vv := range key {
			row[kk] = vv
		}
		row[k] = v
		return row
	}
	tests := []struct {
		name string
		row  schema.Values
		is   error
		want []string
	}{
		{"wrong regular type", with("pages", "many"), schema.ErrInvalidValue, []string{"table authors", "column pages", "want int", `string many`}},
		{"wrong clustering type", with("year", "1993"), schema.ErrInvalidValue, []string{"table authors", `"year"`, "int", "1993"}},
		{"unknown column", with("isbn", "123"), schema.ErrUnknownColumn, []string{"table authors", `"isbn"`, "pages, published"}},
		{"missing clustering", schema.Values{"name": "x", "year": int32(1)}, schema.ErrMissingKey, []string{"table authors", "clustering column title"}},
		{"missing partition", schema.Values{"year": int32(1), "title": "t"}, schema.ErrMissingKey, []string{"partition key column name"}},
		{"empty partition", with("name", ""), schema.ErrInvalidValue, []string{"partition key column name is empty"}},
		{"bad utf8", with("title", "\xff"), schema.ErrInvalidValue, []string{"not valid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b storage.Batch
			err := Insert(&b, &authors, tt.row, schema.WriteOptions{TimestampMicros: 1})
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
	if err := Insert(&b, &authors, with("pages", nil), schema.WriteOptions{TimestampMicros: 1}); err != nil {
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
	cat, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Create(authors); err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	if err := Insert(&b, &authors, schema.Values{"name": "Tom Clancy", "year": int32(1993), "title": "Without Remorse", "pages": int32(639)}, schema.WriteOptions{TimestampMicros: 1}); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddColumn("authors", schema.Column{Name: "isbn", Type: bucket.TypeText}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	cat, err = Open(db)
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
	row, err := DecodeRow(tbl, it.Row())
	if err != nil {
		t.Fatal(err)
	}
	if row.Get("pages") != int32(639) || row.Key[0] != int32(1993) || row.Key[1] != "Without Remorse" {
		t.Fatalf("row %+v", row)
	}
	if _, err := cat.Table("nosuch"); !errors.Is(err, schema.ErrUnknownTable) {
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
	e := schema.Event{ID: id, Type: "click", User: "u1", Data: []byte(`{"x":1}`)}
	var b storage.Batch
	if err := PutEvent(&b, &e, 4, 3600, 10); err != nil {
		t.Fatal(err)
	}
	if err := AddCount(&b, "click", at.Add(30*time.Second), 2); err != nil {
		t.Fatal(err)
	}
	PutCheckpoint(&b, "w", 41)
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	PutCheckpoint(&b, "w", 42)
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if seq, err := ReadCheckpoint(db, "w"); err != nil || seq != 42 {
		t.Fatalf("checkpoint %d %v, want 42", seq, err)
	}
	if seq, err := ReadCheckpoint(db, "other"); err != nil || seq != 0 {
		t.Fatalf("missing checkpoint %d %v, want 0", seq, err)
	}
	pk, _ := bucket.PartitionKeyFor(id, "click", 4)
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.EventsTable, Partition: []byte(pk.String())})
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
	cp, _ := schema.CountsPartition("click", at)
	it, err = db.Slice(context.Background(), storage.SliceQuery{Table: schema.CountsTable, Partition: cp})
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

// TestSchemaMirrorsStorage checks the names schema keeps for the storage
// engine (it cannot import it) are the engine's.
func TestSchemaMirrorsStorage(t *testing.T) {
	var names []string
	for _, def := range BuiltinTableDefs() {
		names = append(names, def.Name)
	}
	if strings.Join(names, ",") != strings.Join(schema.BuiltinTables, ",") {
		t.Errorf("built-in tables: catalog creates %v, schema reserves %v", names, schema.BuiltinTables)
	}
	var fanoutNames []string
	for _, def := range FanoutTableDefs() {
		if !strings.HasPrefix(def.Name, "_") {
			fanoutNames = append(fanoutNames, def.Name)
		}
	}
	if strings.Join(fanoutNames, ",") != strings.Join(schema.FanoutTables, ",") {
		t.Errorf("fan-out tables: catalog creates %v, schema reserves %v", fanoutNames, schema.FanoutTables)
	}
	for _, name := range append(names, fanoutNames...) {
		tbl := schema.Table{Name: name, PartitionKey: []schema.Column{{Name: "k", Type: bucket.TypeText}}}
		if err := tbl.Validate(); !errors.Is(err, schema.ErrInvalidSchema) {
			t.Errorf("a user table named %q: %v, want ErrInvalidSchema (it would share the built-in table)", name, err)
		}
	}
	if string(schema.SizeTiered) != string(storage.SizeTiered) || string(schema.TimeWindow) != string(storage.TimeWindow) {
		t.Errorf("compaction strategies: schema %q %q, storage %q %q", schema.SizeTiered, schema.TimeWindow, storage.SizeTiered, storage.TimeWindow)
	}
}
