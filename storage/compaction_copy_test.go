package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/internal/sstable"
)

// countingCopier is a compaction output that counts the blocks the merge
// copied whole.
type countingCopier struct {
	*sstable.Writer
	copied, declined int
}

func (c *countingCopier) CopyBlock(s *sstable.Scanner) (bool, error) {
	ok, err := c.Writer.CopyBlock(s)
	if ok {
		c.copied++
	} else {
		c.declined++
	}
	return ok, err
}

// TestCompactionBlockCopyMatchesMerge pins the block copy of compactions
// (copyBlock, sstable.Writer.CopyBlock) against the merge of every cell:
// random SSTables, some whose partitions hold strictly newer rows in each
// later file (the copy's case), some overlapping, with partition, range,
// row and cell deletions, expiring cells (some expired past gc_grace,
// some not yet), overwrites with older, equal and newer timestamps, are
// compacted both ways; the two outputs must hold the same partitions,
// deletions and cells, the same statistics, and the merges the same
// counts. Blocks must have been copied in the run, and declined.
func TestCompactionBlockCopyMatchesMerge(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var copied, declined int
	for round := range 12 {
		codec := []string{"s2", "none", "zstd"}[round%3]
		c, f := copyRound(t, rng, codec)
		copied += c
		declined += f
		if t.Failed() {
			t.Fatalf("round %d (%s) failed; seed %d", round, codec, seed)
		}
	}
	if copied == 0 || declined == 0 {
		t.Fatalf("blocks copied %d, declined %d: the test did not exercise both paths (seed %d)", copied, declined, seed)
	}
	t.Logf("blocks copied %d, declined %d", copied, declined)
}

// copyRound writes one random store and compares its compaction with
// and without block copies; it returns the blocks copied and declined.
func copyRound(t *testing.T, rng *rand.Rand, codec string) (int, int) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	opts := DefaultOptions()
	opts.DisableAutoCompaction = true
	opts.WALSyncMode = WALPeriodic
	opts.Clock = clock
	opts.BlockSize = 256 << rng.IntN(4)
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	grace := int64(rng.IntN(2) * 30)
	if err := db.CreateTable(TableDef{Name: "t", Compression: codec, GCGraceSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	const partitions = 6
	ctx := context.Background()
	next := make([]uint64, partitions) // each partition's next ascending key
	files := 2 + rng.IntN(4)
	for f := range files {
		var b Batch
		for p := range partitions {
			pk := fmt.Appendf(nil, "p%d", p)
			if rng.IntN(3) == 0 {
				continue
			}
			ordered := rng.IntN(4) != 0
			rows := rng.IntN(300)
			for range rows {
				k := next[p]
				if ordered {
					next[p]++
				} else {
					k = uint64(rng.IntN(int(next[p]) + 1))
				}
				ck := binary.BigEndian.AppendUint64(nil, k)
				ts := clock.Now().UnixMicro() + int64(f*1000+rng.IntN(3))
				value := bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, 1+rng.IntN(80))
				switch r := rng.IntN(20); {
				case r < 12:
					b.Put("t", pk, ck, []byte("data"), value, ts)
				case r < 17:
					b.PutTTL("t", pk, ck, []byte("data"), value, ts, int32(1+rng.IntN(120)))
				case r < 18:
					b.DeleteCell("t", pk, ck, []byte("data"), ts)
				default:
					b.Put("t", pk, ck, []byte("user"), value[:1], ts)
				}
			}
			switch r := rng.IntN(40); {
			case r == 0:
				b.DeletePartition("t", pk, clock.Now().UnixMicro()+int64(f*1000))
			case r == 1:
				lo := uint64(rng.IntN(int(next[p]) + 1))
				b.DeleteRange("t", pk, Bound{Key: binary.BigEndian.AppendUint64(nil, lo), Inclusive: true},
					Bound{Key: binary.BigEndian.AppendUint64(nil, lo+uint64(rng.IntN(10))), Inclusive: true}, clock.Now().UnixMicro()+int64(f*1000))
			case r == 2:
				b.DeleteRow("t", pk, binary.BigEndian.AppendUint64(nil, uint64(rng.IntN(int(next[p])+1))), clock.Now().UnixMicro()+int64(f*1000))
			}
		}
		if b.Len() > 0 {
			if err := db.Apply(ctx, &b); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Duration(rng.IntN(40)) * time.Second)
	}
	// Some expiring cells are now expired, some past gc_grace.
	clock.Advance(time.Duration(rng.IntN(200)) * time.Second)

	c := benchActiveCompaction(t, db, "t")
	if len(c.inputs) == 0 {
		return 0, 0
	}
	copyOut, err := db.createSSTable(c.table, shortLived, nil)
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingCopier{Writer: copyOut.w}
	copyStats, err := db.mergeInputs(c, counter)
	if err != nil {
		t.Fatal(err)
	}
	copyH, err := copyOut.finish(db)
	if err != nil {
		t.Fatal(err)
	}
	defer copyH.discard()

	merged := *c
	merged.noBlockCopy = true
	mergeOut, err := db.createSSTable(c.table, shortLived, nil)
	if err != nil {
		t.Fatal(err)
	}
	mergeStats, err := db.mergeInputs(&merged, mergeOut.w)
	if err != nil {
		t.Fatal(err)
	}
	mergeH, err := mergeOut.finish(db)
	if err != nil {
		t.Fatal(err)
	}
	defer mergeH.discard()

	for _, h := range []*sstHandle{copyH, mergeH} {
		if err := h.reader.Check(); err != nil {
			t.Errorf("check of the output: %v", err)
		}
	}
	if copyStats != mergeStats {
		t.Errorf("compaction stats with block copies %+v, merged %+v", copyStats, mergeStats)
	}
	got, want := dumpSSTable(t, copyH), dumpSSTable(t, mergeH)
	if got != want {
		t.Errorf("with block copies the output holds\n%s\nmerged\n%s", got, want)
	}
	gp, wp := copyH.props, mergeH.props
	for _, p := range []*sstable.Properties{&gp, &wp} {
		// What only the layout decides.
		p.DataBlocks, p.DataBytes, p.IndexBytes, p.FileBytes = 0, 0, 0, 0
	}
	if fmt.Sprintf("%+v", gp) != fmt.Sprintf("%+v", wp) {
		t.Errorf("properties with block copies\n%+v\nmerged\n%+v", gp, wp)
	}
	return counter.copied, counter.declined
}

// dumpSSTable prints every partition, deletion and cell of h.
func dumpSSTable(t *testing.T, h *sstHandle) string {
	t.Helper()
	var out bytes.Buffer
	s := h.reader.NewScanner()
	defer s.Close()
	for s.NextPartition() {
		info := s.Partition()
		fmt.Fprintf(&out, "partition %q del=%+v ranges=%d cells=%d ts=%d..%d ldt=%d ck=%x..%x\n", info.Key, info.Deletions.Partition,
			len(info.Deletions.Ranges), info.Cells, info.MinTimestamp, info.MaxTimestamp, info.MaxLocalDeletionTime, info.MinClustering, info.MaxClustering)
		for _, rt := range info.Deletions.Ranges {
			fmt.Fprintf(&out, "  range %+v\n", rt)
		}
		for s.NextCell() {
			c := s.Cell()
			fmt.Fprintf(&out, "  %x/%s kind=%d ts=%d ttl=%d ldt=%d v=%q\n", c.Clustering, c.Column, c.Kind, c.Timestamp, c.TTL, c.LocalDeletionTime, c.Value)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
