package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/eventide/eventide/storage/internal/base"
)

// Batch is a set of mutations across tables applied atomically by
// DB.Apply: after a crash either all of them are present or none is. A
// Batch is not safe for concurrent use; it may be reused after Reset.
//
// Timestamps are write times in microseconds since the Unix epoch (use
// DB.NowMicros for "now"); the highest wins. Counter additions take their
// timestamp from the engine clock, as Cassandra refuses client timestamps
// on counters.
type Batch struct {
	mutations []mutation
	sizeBytes int
}

type mutationOp uint8

// Mutation operations as stored in WAL records; never renumber.
const (
	opCell              mutationOp = 1
	opRangeTombstone    mutationOp = 2
	opPartitionDeletion mutationOp = 3
)

// mutation is one change. Before Apply, ttlSeconds and useDefaultTTL
// describe the requested expiry and cell.LocalDeletionTime is unset;
// Apply resolves them against the table and the clock.
type mutation struct {
	op            mutationOp
	table         string
	tableID       uint32
	partition     []byte
	cell          base.Cell
	rangeTomb     base.RangeTombstone
	deletion      base.DeletionTime
	useDefaultTTL bool
	counterDelta  int64
}

// Len returns the number of mutations.
func (b *Batch) Len() int { return len(b.mutations) }

// SizeBytes estimates the batch's encoded size.
func (b *Batch) SizeBytes() int { return b.sizeBytes }

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	clear(b.mutations)
	b.mutations = b.mutations[:0]
	b.sizeBytes = 0
}

func (b *Batch) add(m mutation) {
	b.sizeBytes += mutationSize(&m)
	b.mutations = append(b.mutations, m)
}

func mutationSize(m *mutation) int {
	return 32 + len(m.partition) + len(m.cell.Clustering) + len(m.cell.Column) + len(m.cell.Value) +
		len(m.rangeTomb.Start.Key) + len(m.rangeTomb.End.Key)
}

// Filter keeps only the mutations whose table and partition keep accepts,
// in order. A storage node of a sharded deployment uses it to leave out
// the partitions of shards it does not own.
func (b *Batch) Filter(keep func(table string, partition []byte) bool) {
	kept := b.mutations[:0]
	b.sizeBytes = 0
	for i := range b.mutations {
		if m := &b.mutations[i]; keep(m.table, m.partition) {
			b.sizeBytes += mutationSize(m)
			kept = append(kept, *m)
		}
	}
	clear(b.mutations[len(kept):])
	b.mutations = kept
}

// Put upserts a cell. It expires after the table's default TTL, if the
// table has one. The batch keeps the slices until Apply: do not modify them.
func (b *Batch) Put(table string, partition, clustering, column, value []byte, timestampMicros int64) {
	b.add(mutation{op: opCell, table: table, partition: partition, useDefaultTTL: true,
		cell: base.Cell{Clustering: clustering, Column: column, Kind: base.KindLive, Timestamp: timestampMicros, Value: value}})
}

// PutTTL upserts a cell that expires ttlSeconds after it is applied,
// overriding the table's default; ttlSeconds 0 means it never expires.
func (b *Batch) PutTTL(table string, partition, clustering, column, value []byte, timestampMicros int64, ttlSeconds int32) {
	c := base.Cell{Clustering: clustering, Column: column, Kind: base.KindLive, Timestamp: timestampMicros, Value: value}
	if ttlSeconds != 0 {
		c.Kind, c.TTL = base.KindExpiring, ttlSeconds
	}
	b.add(mutation{op: opCell, table: table, partition: partition, cell: c})
}

// DeleteCell deletes one cell: versions written at or before
// timestampMicros are shadowed.
func (b *Batch) DeleteCell(table string, partition, clustering, column []byte, timestampMicros int64) {
	b.add(mutation{op: opCell, table: table, partition: partition,
		cell: base.Cell{Clustering: clustering, Column: column, Kind: base.KindTombstone, Timestamp: timestampMicros}})
}

// DeleteRow deletes every cell of one row written at or before
// timestampMicros.
func (b *Batch) DeleteRow(table string, partition, clustering []byte, timestampMicros int64) {
	b.DeleteRange(table, partition, Bound{Key: clustering, Inclusive: true}, Bound{Key: clustering, Inclusive: true}, timestampMicros)
}

// DeleteRange deletes every cell whose clustering key lies between start
// and end (a nil Key is unbounded) written at or before timestampMicros.
func (b *Batch) DeleteRange(table string, partition []byte, start, end Bound, timestampMicros int64) {
	b.add(mutation{op: opRangeTombstone, table: table, partition: partition,
		rangeTomb: base.RangeTombstone{Start: start, End: end, Deletion: base.DeletionTime{MarkedForDeleteAt: timestampMicros}}})
}

// DeletePartition deletes every cell of a partition written at or before
// timestampMicros.
func (b *Batch) DeletePartition(table string, partition []byte, timestampMicros int64) {
	b.add(mutation{op: opPartitionDeletion, table: table, partition: partition,
		deletion: base.DeletionTime{MarkedForDeleteAt: timestampMicros}})
}

// AddCounter adds delta to a counter cell. Deltas merge on read and in
// compaction. As in Cassandra, a counter cell that was deleted must not be
// incremented again.
func (b *Batch) AddCounter(table string, partition, clustering, column []byte, delta int64) {
	b.add(mutation{op: opCell, table: table, partition: partition, counterDelta: delta,
		cell: base.Cell{Clustering: clustering, Column: column, Kind: base.KindCounter}})
}

// resolve fills table ids, expiry times, deletion times and counter
// timestamps so the mutations are final and replay deterministically.
func (b *Batch) resolve(lookup func(string) (*tableState, error), nowSeconds, counterMicros int64) error {
	// A writer's batch is runs of one table's mutations (an event's
	// cells): the last lookup is kept, and a name equal to its name (the
	// same string, usually: a pointer comparison) skips the map.
	var lastName string
	var t *tableState
	for i := range b.mutations {
		m := &b.mutations[i]
		if t == nil || m.table != lastName {
			var err error
			if t, err = lookup(m.table); err != nil {
				return err
			}
			lastName = m.table
		}
		m.tableID = t.id
		if len(m.partition) == 0 {
			return fmt.Errorf("cannot apply batch: mutation %d on table %q has an empty partition key", i, m.table)
		}
		switch m.op {
		case opCell:
			c := &m.cell
			if m.useDefaultTTL && t.def.DefaultTTLSeconds > 0 {
				c.Kind, c.TTL = base.KindExpiring, t.def.DefaultTTLSeconds
			}
			switch c.Kind {
			case base.KindLive:
				c.LocalDeletionTime = base.NoDeletionTime
			case base.KindExpiring:
				if c.TTL < 0 {
					return fmt.Errorf("cannot apply batch: negative TTL %d on table %q", c.TTL, m.table)
				}
				c.LocalDeletionTime = nowSeconds + int64(c.TTL)
			case base.KindTombstone:
				c.LocalDeletionTime = nowSeconds
			case base.KindCounter:
				if !t.def.Counters {
					return fmt.Errorf("cannot add to counter on table %q: the table is not a counter table", m.table)
				}
				c.Timestamp = counterMicros
				c.LocalDeletionTime = base.NoDeletionTime
				c.Value = base.EncodeCounter(m.counterDelta)
			}
			if c.Kind != base.KindCounter && c.Kind != base.KindTombstone && t.def.Counters {
				return fmt.Errorf("cannot put a regular cell into counter table %q", m.table)
			}
		case opRangeTombstone:
			m.rangeTomb.Deletion.LocalDeletionTime = nowSeconds
		case opPartitionDeletion:
			m.deletion.LocalDeletionTime = nowSeconds
		}
	}
	return nil
}

// The WAL record of a batch, after resolve. Integers are unsigned or
// zig-zag signed varints (encoding/binary); bytes are a uvarint length
// followed by the bytes.
//
//	record    := version:u8 (=batchRecordVersion) count:uvarint mutation*
//	mutation  := op:u8 table:uvarint partition:bytes body
//	body(1)   := clustering:bytes column:bytes kind:u8 timestamp:varint
//	             [ttl:uvarint ldt:varint   if kind = expiring]
//	             [ldt:varint               if kind = tombstone]
//	             value:bytes
//	body(2)   := start:bound end:bound markedForDeleteAt:varint ldt:varint
//	body(3)   := markedForDeleteAt:varint ldt:varint
//	bound     := flags:u8 (bit 0 = has key, bit 1 = inclusive) [key:bytes if has key]
//
// Counter cells store their delta as the 8-byte value.
const batchRecordVersion = 1

const (
	boundHasKey    = 1 << 0
	boundInclusive = 1 << 1
)

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendBound(dst []byte, b base.Bound) []byte {
	var flags byte
	if b.Key != nil {
		flags |= boundHasKey
	}
	if b.Inclusive {
		flags |= boundInclusive
	}
	dst = append(dst, flags)
	if b.Key != nil {
		dst = appendBytes(dst, b.Key)
	}
	return dst
}

// appendRecord encodes resolved mutations as one WAL record.
func appendRecord(dst []byte, muts []mutation) []byte {
	dst = append(dst, batchRecordVersion)
	dst = binary.AppendUvarint(dst, uint64(len(muts)))
	for i := range muts {
		m := &muts[i]
		dst = append(dst, byte(m.op))
		dst = binary.AppendUvarint(dst, uint64(m.tableID))
		dst = appendBytes(dst, m.partition)
		switch m.op {
		case opCell:
			c := &m.cell
			dst = appendBytes(dst, c.Clustering)
			dst = appendBytes(dst, c.Column)
			dst = append(dst, byte(c.Kind))
			dst = binary.AppendVarint(dst, c.Timestamp)
			switch c.Kind {
			case base.KindExpiring:
				dst = binary.AppendUvarint(dst, uint64(c.TTL))
				dst = binary.AppendVarint(dst, c.LocalDeletionTime)
			case base.KindTombstone:
				dst = binary.AppendVarint(dst, c.LocalDeletionTime)
			}
			dst = appendBytes(dst, c.Value)
		case opRangeTombstone:
			dst = appendBound(dst, m.rangeTomb.Start)
			dst = appendBound(dst, m.rangeTomb.End)
			dst = binary.AppendVarint(dst, m.rangeTomb.Deletion.MarkedForDeleteAt)
			dst = binary.AppendVarint(dst, m.rangeTomb.Deletion.LocalDeletionTime)
		case opPartitionDeletion:
			dst = binary.AppendVarint(dst, m.deletion.MarkedForDeleteAt)
			dst = binary.AppendVarint(dst, m.deletion.LocalDeletionTime)
		}
	}
	return dst
}

// recordDecoder reads a WAL record; every read checks the remaining input
// so any byte string decodes or fails with a corruption error.
type recordDecoder struct {
	buf []byte
	err error
}

func (d *recordDecoder) fail(what string) {
	if d.err == nil {
		d.err = base.CorruptionErrorf("cannot decode batch record: truncated or invalid %s", what)
	}
}

func (d *recordDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *recordDecoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *recordDecoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) == 0 {
		d.fail(what)
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *recordDecoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.fail(what)
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *recordDecoder) bound(what string) base.Bound {
	flags := d.byte(what)
	if flags&^(boundHasKey|boundInclusive) != 0 {
		d.fail(what + " flags")
	}
	b := base.Bound{Inclusive: flags&boundInclusive != 0}
	if flags&boundHasKey != 0 {
		b.Key = d.bytes(what)
		if b.Key == nil && d.err == nil {
			b.Key = []byte{}
		}
	}
	return b
}

// decodeRecord parses a WAL record. The mutations alias rec.
func decodeRecord(rec []byte) ([]mutation, error) {
	d := recordDecoder{buf: rec}
	if v := d.byte("version"); d.err == nil && v != batchRecordVersion {
		return nil, base.CorruptionErrorf("cannot decode batch record: version %d, want %d", v, batchRecordVersion)
	}
	count := d.uvarint("mutation count")
	// Each mutation takes at least 4 bytes, which bounds the allocation.
	if d.err == nil && count > uint64(len(d.buf))/4 {
		d.fail("mutation count")
	}
	if d.err != nil {
		return nil, d.err
	}
	muts := make([]mutation, 0, count)
	for i := uint64(0); i < count && d.err == nil; i++ {
		var m mutation
		m.op = mutationOp(d.byte("op"))
		table := d.uvarint("table id")
		if table > 1<<32-1 {
			d.fail("table id")
		}
		m.tableID = uint32(table)
		m.partition = d.bytes("partition")
		switch m.op {
		case opCell:
			c := &m.cell
			c.Clustering = d.bytes("clustering")
			c.Column = d.bytes("column")
			c.Kind = base.Kind(d.byte("kind"))
			c.Timestamp = d.varint("timestamp")
			c.LocalDeletionTime = base.NoDeletionTime
			switch c.Kind {
			case base.KindExpiring:
				ttl := d.uvarint("ttl")
				if ttl > 1<<31-1 {
					d.fail("ttl")
				}
				c.TTL = int32(ttl)
				c.LocalDeletionTime = d.varint("local deletion time")
			case base.KindTombstone:
				c.LocalDeletionTime = d.varint("local deletion time")
			case base.KindLive, base.KindCounter:
			default:
				d.fail("cell kind")
			}
			c.Value = d.bytes("value")
			if c.Kind == base.KindCounter && len(c.Value) != 8 {
				d.fail("counter value")
			}
		case opRangeTombstone:
			m.rangeTomb.Start = d.bound("range start")
			m.rangeTomb.End = d.bound("range end")
			m.rangeTomb.Deletion.MarkedForDeleteAt = d.varint("deletion timestamp")
			m.rangeTomb.Deletion.LocalDeletionTime = d.varint("deletion time")
		case opPartitionDeletion:
			m.deletion.MarkedForDeleteAt = d.varint("deletion timestamp")
			m.deletion.LocalDeletionTime = d.varint("deletion time")
		default:
			d.fail("mutation op")
		}
		muts = append(muts, m)
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail("record (trailing bytes)")
	}
	if d.err != nil {
		return nil, d.err
	}
	return muts, nil
}
