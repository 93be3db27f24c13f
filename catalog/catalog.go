package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/storage"
)

// SchemasTable persists the catalog inside the store it describes, so
// schemas live (and are backed up, and recovered) with the data directory:
// partition "tables", clustering key the table name, column "def" holding
// the table's JSON (Table.MarshalJSON).
const SchemasTable = "_schemas"

var schemasPartition = []byte("tables")

// Catalog holds the schemas of a store's tables. It is safe for concurrent
// use.
type Catalog struct {
	db     *storage.DB
	mu     sync.RWMutex
	tables map[string]*schema.Table
}

// Open loads the catalog of db, creating the built-in tables and the
// schema table when they are missing.
func Open(db *storage.DB) (*Catalog, error) {
	if err := EnsureBuiltinTables(db); err != nil {
		return nil, err
	}
	if _, ok := db.Table(SchemasTable); !ok {
		if err := db.CreateTable(storage.TableDef{Name: SchemasTable}); err != nil {
			return nil, fmt.Errorf("create schema table: %w", err)
		}
	}
	c := &Catalog{db: db, tables: map[string]*schema.Table{}}
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: SchemasTable, Partition: schemasPartition})
	if err != nil {
		return nil, fmt.Errorf("load schemas: %w", err)
	}
	defer it.Close()
	for it.Next() {
		row := it.Row()
		for _, cell := range row.Cells {
			if string(cell.Column) != "def" {
				continue
			}
			var t schema.Table
			if err := json.Unmarshal(cell.Value, &t); err != nil {
				return nil, fmt.Errorf("load schema of table %q: %w: %w", row.Clustering, storage.ErrCorruption, err)
			}
			c.tables[t.Name] = &t
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("load schemas: %w", err)
	}
	return c, nil
}

// Create defines a new table, or replaces the definition of an existing
// one when the change is compatible (same keys; columns only added, never
// removed or retyped). It is durable when it returns.
func (c *Catalog) Create(t schema.Table) error {
	if err := t.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.tables[t.Name]; ok {
		if err := compatible(old, &t); err != nil {
			return err
		}
	}
	if err := c.db.CreateTable(StorageDef(&t)); err != nil {
		return fmt.Errorf("create table %s: %w", t.Name, err)
	}
	def, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("create table %s: %w", t.Name, err)
	}
	var b storage.Batch
	b.Put(SchemasTable, schemasPartition, []byte(t.Name), []byte("def"), def, c.db.NowMicros())
	if err := c.db.Apply(context.Background(), &b); err != nil {
		return fmt.Errorf("create table %s: persist schema: %w", t.Name, err)
	}
	c.tables[t.Name] = &t
	return nil
}

// AddColumn adds a regular column to a table: a metadata change only.
func (c *Catalog) AddColumn(table string, col schema.Column) error {
	t, err := c.Table(table)
	if err != nil {
		return err
	}
	nt := *t
	nt.Columns = append(append([]schema.Column(nil), t.Columns...), col)
	return c.Create(nt)
}

// Table returns the schema of table name.
func (c *Catalog) Table(name string) (*schema.Table, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.tables[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (tables: %v)", schema.ErrUnknownTable, name, c.namesLocked())
	}
	return t, nil
}

// Tables returns the names of the user tables, sorted.
func (c *Catalog) Tables() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.namesLocked()
}

func (c *Catalog) namesLocked() []string {
	names := make([]string, 0, len(c.tables))
	for n := range c.tables {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// compatible refuses changes that would make stored rows undecodable or
// misplaced: keys must stay identical, columns may only be added.
func compatible(old, nu *schema.Table) error {
	same := len(old.PartitionKey) == len(nu.PartitionKey) && len(old.Clustering) == len(nu.Clustering)
	for i := 0; same && i < len(old.PartitionKey); i++ {
		same = old.PartitionKey[i] == nu.PartitionKey[i]
	}
	for i := 0; same && i < len(old.Clustering); i++ {
		same = old.Clustering[i] == nu.Clustering[i]
	}
	if !same {
		return fmt.Errorf("%w: table %s exists with a different primary key; keys cannot change", schema.ErrInvalidSchema, old.Name)
	}
	for _, oc := range old.Columns {
		nc, ok := nu.Column(oc.Name)
		if !ok {
			return fmt.Errorf("%w: table %s: column %s cannot be dropped", schema.ErrInvalidSchema, old.Name, oc.Name)
		}
		if nc.Type != oc.Type {
			return fmt.Errorf("%w: table %s: column %s is %s and cannot become %s", schema.ErrInvalidSchema, old.Name, oc.Name, oc.Type, nc.Type)
		}
	}
	return nil
}
