package consumer

import (
	"context"
	"testing"

	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

func TestCopyCheckpoint(t *testing.T) {
	db, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := catalog.EnsureBuiltinTables(db); err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	catalog.PutCheckpoint(&b, checkpointKey("a", 0), 40)
	catalog.PutCheckpoint(&b, epochKey("b"), 2)
	catalog.PutCheckpoint(&b, checkpointKey("b", 2), 7)
	if err := db.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to string
		want     Checkpoint
	}{
		{"a", "a2", Checkpoint{Epoch: 0, Key: "a2", Seq: 40}},
		{"b", "b2", Checkpoint{Epoch: 2, Key: "b2.2", Seq: 7}},
		{"none", "none2", Checkpoint{Key: "none2"}},
	} {
		got, err := CopyCheckpoint(db, tc.from, tc.to)
		if err != nil || got != tc.want {
			t.Errorf("CopyCheckpoint(%s, %s) = %+v, %v; want %+v", tc.from, tc.to, got, err, tc.want)
		}
		if read, err := ReadCheckpoint(db, tc.to); err != nil || read != tc.want {
			t.Errorf("ReadCheckpoint(%s) after the copy = %+v, %v; want %+v", tc.to, read, err, tc.want)
		}
	}
	if _, err := CopyCheckpoint(db, "a", "b"); err == nil {
		t.Error("copying onto a consumer that has a checkpoint: no error")
	}
}
