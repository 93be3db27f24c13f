package storage

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/internal/memtable"
	"github.com/eventide/eventide/storage/internal/sstable"
	"github.com/eventide/eventide/storage/vfs"
)

// BenchmarkFlushMemtable writes a frozen memtable of 250,000 events (about
// 64 MiB: loadtest/peers' equal-memory memtable), filled in the peers'
// order (20 partitions, TimeUUID DESC keys with jittered times), to an S2
// SSTable, as a flush does; one op is one cell.
func BenchmarkFlushMemtable(b *testing.B) {
	const cells = 250_000
	mem := memtable.New()
	value := make([]byte, 200)
	c := base.Cell{Column: []byte("data"), Kind: base.KindLive, LocalDeletionTime: base.NoDeletionTime, Value: value}
	var pks [20][]byte
	for i := range pks {
		pks[i] = fmt.Appendf(nil, "01112610|type%02d", i)
	}
	var ck [16]byte
	rng := uint64(1)
	for i := range cells {
		rng = rng*6364136223846793005 + 1442695040888963407
		binary.BigEndian.PutUint64(ck[:], ^uint64(i*100+int(rng>>40%4800)))
		binary.BigEndian.PutUint64(ck[8:], rng)
		for j := range value {
			value[j] = byte(rng >> (j % 56))
		}
		c.Clustering = ck[:]
		c.Timestamp = int64(i)
		mem.ApplyCell(1, pks[rng>>59%20], &c)
	}
	dir := b.TempDir()
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for done, n := 0, 0; done < b.N; done, n = done+cells, n+1 {
		f, err := vfs.Default.Create(filepath.Join(dir, fmt.Sprintf("%d.sst", n)))
		if err != nil {
			b.Fatal(err)
		}
		w := sstable.NewWriter(f, sstable.WriterOptions{Compression: sstable.CompressionS2})
		if err := writeMemtable(w, mem, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Finish(); err != nil {
			b.Fatal(err)
		}
		if err := vfs.Default.Remove(filepath.Join(dir, fmt.Sprintf("%d.sst", n))); err != nil {
			b.Fatal(err)
		}
	}
}
