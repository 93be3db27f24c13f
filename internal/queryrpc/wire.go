package queryrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/eventide/eventide/reader"
	"github.com/eventide/eventide/storage"
)

// The wire format of the storage service. Every message starts with its
// format version, a byte; a decoder refuses a version it does not know
// (ErrBadMessage), so a node and a query service of different releases
// fail loudly instead of misreading each other. Integers are Go's
// encoding/binary varints: "uvarint" unsigned, "varint" zig-zag signed.
// "bytes" is a uvarint length followed by that many bytes.
//
// Slice request (query service -> node, subject <prefix>.<node>.slice):
//
//	u8      version = sliceRequestV1
//	varint  deadline, unix microseconds; 0: none (the node applies its own cap)
//	uvarint byte budget of the reply's rows; 0: the node's default
//	bytes   table name
//	bytes   partition key
//	u8      flags: flagReverse | flagStart | flagStartInclusive | flagEnd | flagEndInclusive
//	bytes   start clustering key     (only with flagStart; absent: unbounded)
//	bytes   end clustering key       (only with flagEnd)
//	uvarint limit, rows; 0: no limit
//	uvarint max tombstones; 0: no limit
//
// Slice reply (node -> query service), when the node could run the slice:
//
//	u8      version = sliceReplyV1
//	u8      flags: replyMore (the byte budget ended the reply: rows may
//	        follow the last one; ask again from after it)
//	11 x uvarint  the read's storage.ReadStats, in field order: Rows,
//	        LiveCells, TombstonesScanned, MemtablesRead, SSTablesRead,
//	        SSTablesSkipped, SSTablesSkippedByBloom, SSTablesSkippedExpired,
//	        BlocksRead, BlocksSkipped, and 0 (reserved)
//	uvarint row count
//	row count x row:
//	    bytes   clustering key
//	    uvarint cell count (at least 1)
//	    cell count x cell:
//	        bytes   column
//	        bytes   value
//	        varint  write time, microseconds
//	        varint  expires at, unix seconds; 0: never
//	        varint  TTL seconds
//	        u8      cell flags: cellCounter
//	        varint  counter value   (only with cellCounter)
//
// Walk request (query service -> node, subject <prefix>.<node>.walk): a
// reader.Walk, the groups of partitions of a whole event query (one group
// per hour bucket, its sub-partitions) run on the node in one request
// instead of one slice request per partition:
//
//	u8      version = walkRequestV1
//	varint  deadline, as in a slice request
//	uvarint byte budget of the reply's rows; 0: the node's default
//	bytes   table name
//	u8      flags, start key, end key: as in a slice request
//	uvarint limit, rows of the whole walk; 0: no limit
//	uvarint max tombstones of the whole walk; 0: no limit
//	uvarint group count (at least 1)
//	group count x group:
//	    uvarint partition count (at least 1)
//	    partition count x bytes partition key
//
// Walk reply (node -> query service), when the node could run the walk:
//
//	u8      version = walkReplyV1
//	u8      flags: replyMore (the byte budget ended the reply: ask again
//	        from the last row's group, after its key)
//	11 x uvarint  the walk's storage.ReadStats summed, as in a slice reply
//	uvarint partitions sliced
//	uvarint row count
//	row count x (uvarint group index, row as in a slice reply)
//
// A walk that fails answers with the error headers of a slice; a 422 (too
// many tombstones) adds the header Eventide-Walk-Group: the index of the
// group where the walk gave up.
//
// A node that cannot run the slice answers with the micro service error
// headers (Nats-Service-Error-Code, Nats-Service-Error) and an empty body:
// code 400 for a query the node refuses (unknown table, bad bounds), 422
// for too many tombstones, 504 when the deadline passed, 503 when the node
// is shutting down, 500 for anything else; the description is the node's
// error message.
//
// Freshness reply (subject <prefix>.<node>.freshness, empty request):
//
//	u8      version = freshnessReplyV1
//	u8      flags: freshWriter | freshFanout (which positions follow)
//	per position present, writer first:
//	    uvarint applied stream sequence
//	    varint  time of the applied message, unix nanoseconds; 0: unknown
//	    u8      1 when the pending count is known, else 0
//	    uvarint pending messages
//	uvarint shard count of the node's configuration
//	uvarint owned shard count n, then n x uvarint shard
//
// Stats reply (subject <prefix>.<node>.stats, empty request): a JSON
// document, NodeStats (stats.go), with "version": statsReplyV1; small and
// rare, so readable beats compact there.
//
// Health reply (subject <prefix>.<node>.health, empty request):
//
//	u8      version = healthReplyV1
//	u8      1 when the node is ready, else 0
//	bytes   detail: why it is not ready ("" when ready)
const (
	sliceRequestV1   = 1
	sliceReplyV1     = 1
	walkRequestV1    = 1
	walkReplyV1      = 1
	freshnessReplyV1 = 1
	healthReplyV1    = 1
)

// Slice request flags.
const (
	flagReverse = 1 << iota
	flagStart
	flagStartInclusive
	flagEnd
	flagEndInclusive
	sliceFlagsKnown = flagReverse | flagStart | flagStartInclusive | flagEnd | flagEndInclusive
)

// Slice reply and cell flags.
const (
	replyMore   = 1
	cellCounter = 1

	freshWriter = 1
	freshFanout = 2
)

// statsFields is how many uvarints encode a storage.ReadStats.
const statsFields = 11

// maxShards bounds the shard counts a freshness reply may carry.
const maxShards = 1 << 16

// ErrBadMessage is wrapped by every decoding error: the bytes are not a
// message of a known version of the format.
var ErrBadMessage = errors.New("eventide/queryrpc: malformed message")

// sliceRequest is one storage.SliceQuery with what travels with it.
type sliceRequest struct {
	Query storage.SliceQuery
	// Deadline is when the caller stops waiting; zero: none.
	Deadline time.Time
	// ByteBudget bounds the encoded rows of the reply; 0: the node's
	// default.
	ByteBudget int
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// appendRequestHead appends what every request starts with: its version,
// its deadline (varint Unix microseconds, 0: none) and its byte budget
// (uvarint, 0: the node's default).
func appendRequestHead(dst []byte, version byte, deadline time.Time, byteBudget int) []byte {
	dst = append(dst, version)
	var us int64
	if !deadline.IsZero() {
		us = max(deadline.UnixMicro(), 1)
	}
	dst = binary.AppendVarint(dst, us)
	return binary.AppendUvarint(dst, uint64(max(byteBudget, 0)))
}

// requestHead reads what appendRequestHead wrote, for a request of the
// given version.
func (d *decoder) requestHead(version byte) (deadline time.Time, byteBudget int) {
	d.version(version)
	if us := d.varint("deadline"); us != 0 {
		deadline = time.UnixMicro(us)
	}
	return deadline, d.int("byte budget")
}

// appendSliceRequest appends the encoding of r to dst.
func appendSliceRequest(dst []byte, r *sliceRequest) []byte {
	q := &r.Query
	dst = appendRequestHead(dst, sliceRequestV1, r.Deadline, r.ByteBudget)
	dst = appendBytes(dst, []byte(q.Table))
	dst = appendBytes(dst, q.Partition)
	dst = appendBounds(dst, q.Reverse, q.Start, q.End)
	dst = binary.AppendUvarint(dst, uint64(max(q.Limit, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(q.MaxTombstones, 0)))
	return dst
}

// appendBounds appends the flags byte and the keys of a slice's bounds.
func appendBounds(dst []byte, reverse bool, start, end storage.Bound) []byte {
	var flags byte
	if reverse {
		flags |= flagReverse
	}
	if start.Key != nil {
		flags |= flagStart
		if start.Inclusive {
			flags |= flagStartInclusive
		}
	}
	if end.Key != nil {
		flags |= flagEnd
		if end.Inclusive {
			flags |= flagEndInclusive
		}
	}
	dst = append(dst, flags)
	if start.Key != nil {
		dst = appendBytes(dst, start.Key)
	}
	if end.Key != nil {
		dst = appendBytes(dst, end.Key)
	}
	return dst
}

// decoder reads the fields of one message; the first error sticks.
type decoder struct {
	b    []byte
	what string
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrBadMessage, d.what, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("cannot read %s: message ends", field)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("cannot read %s: bad or truncated uvarint", field)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("cannot read %s: bad or truncated varint", field)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a uvarint that must fit a non-negative int32-range count.
func (d *decoder) int(field string) int {
	v := d.uvarint(field)
	if v > math.MaxInt32 {
		d.fail("%s %d is out of range", field, v)
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed field; the result aliases the message.
func (d *decoder) bytes(field string) []byte {
	if d.err != nil {
		return nil
	}
	// Not d.uvarint(field + " length"): that concatenation cost an
	// allocation per field of every message.
	n, w := binary.Uvarint(d.b)
	if w <= 0 {
		d.fail("cannot read %s length: bad or truncated uvarint", field)
		return nil
	}
	d.b = d.b[w:]
	if n > uint64(len(d.b)) {
		d.fail("%s length %d exceeds the %d bytes left", field, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) version(want byte) {
	if v := d.byte("version"); d.err == nil && v != want {
		d.fail("version %d, want %d", v, want)
	}
}

func (d *decoder) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes left after the message", len(d.b))
	}
	return d.err
}

// decodeSliceRequest decodes a slice request. Keys alias src.
func decodeSliceRequest(src []byte) (*sliceRequest, error) {
	d := decoder{b: src, what: "slice request"}
	r := &sliceRequest{}
	r.Deadline, r.ByteBudget = d.requestHead(sliceRequestV1)
	r.Query.Table = string(d.bytes("table"))
	r.Query.Partition = d.bytes("partition")
	r.Query.Reverse, r.Query.Start, r.Query.End = d.bounds()
	r.Query.Limit = d.int("limit")
	r.Query.MaxTombstones = d.int("max tombstones")
	if err := d.end(); err != nil {
		return nil, err
	}
	return r, nil
}

// bounds reads what appendBounds wrote.
func (d *decoder) bounds() (reverse bool, start, end storage.Bound) {
	flags := d.byte("flags")
	if d.err == nil && flags&^sliceFlagsKnown != 0 {
		d.fail("unknown flags %#x", flags)
	}
	if d.err == nil && (flags&flagStart == 0 && flags&flagStartInclusive != 0 || flags&flagEnd == 0 && flags&flagEndInclusive != 0) {
		d.fail("flags %#x: an inclusive bound without its key", flags)
	}
	if d.err != nil {
		return false, start, end
	}
	reverse = flags&flagReverse != 0
	if flags&flagStart != 0 {
		start = storage.Bound{Key: nonNil(d.bytes("start key")), Inclusive: flags&flagStartInclusive != 0}
	}
	if flags&flagEnd != 0 {
		end = storage.Bound{Key: nonNil(d.bytes("end key")), Inclusive: flags&flagEndInclusive != 0}
	}
	return reverse, start, end
}

// nonNil keeps an empty present key present: a nil Key is unbounded.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// sliceReply is a decoded slice reply.
type sliceReply struct {
	More  bool
	Stats storage.ReadStats
	Rows  []storage.Row
}

// appendReplyHeader appends a reply's version, flags and stats: the part
// before the rows.
func appendReplyHeader(dst []byte, more bool, s storage.ReadStats) []byte {
	dst = append(dst, sliceReplyV1)
	var flags byte
	if more {
		flags |= replyMore
	}
	dst = append(dst, flags)
	for _, v := range statsValues(&s) {
		dst = binary.AppendUvarint(dst, uint64(max(*v, 0)))
	}
	return dst
}

// statsFieldNames name the stats fields in decoding errors.
var statsFieldNames = [statsFields]string{"stats field 0", "stats field 1", "stats field 2", "stats field 3", "stats field 4",
	"stats field 5", "stats field 6", "stats field 7", "stats field 8", "stats field 9", "stats field 10"}

// statsValues lists the fields of s in wire order; the last is reserved.
func statsValues(s *storage.ReadStats) [statsFields]*int {
	var reserved int
	return [statsFields]*int{&s.Rows, &s.LiveCells, &s.TombstonesScanned, &s.MemtablesRead, &s.SSTablesRead,
		&s.SSTablesSkipped, &s.SSTablesSkippedByBloom, &s.SSTablesSkippedExpired, &s.BlocksRead, &s.BlocksSkipped, &reserved}
}

// appendRow appends the encoding of one row.
func appendRow(dst []byte, r *storage.Row) []byte {
	dst = appendBytes(dst, r.Clustering)
	dst = binary.AppendUvarint(dst, uint64(len(r.Cells)))
	for i := range r.Cells {
		c := &r.Cells[i]
		dst = appendBytes(dst, c.Column)
		dst = appendBytes(dst, c.Value)
		dst = binary.AppendVarint(dst, c.WriteTimeMicros)
		dst = binary.AppendVarint(dst, c.ExpiresAt)
		dst = binary.AppendVarint(dst, int64(c.TTLSeconds))
		if c.Counter {
			dst = append(dst, cellCounter)
			dst = binary.AppendVarint(dst, c.CounterValue)
		} else {
			dst = append(dst, 0)
		}
	}
	return dst
}

// appendSliceReply appends a whole reply: header, row count and rows.
func appendSliceReply(dst []byte, r *sliceReply) []byte {
	dst = appendReplyHeader(dst, r.More, r.Stats)
	dst = binary.AppendUvarint(dst, uint64(len(r.Rows)))
	for i := range r.Rows {
		dst = appendRow(dst, &r.Rows[i])
	}
	return dst
}

// decodeSliceReply decodes a slice reply. Keys and values alias src.
func decodeSliceReply(src []byte) (*sliceReply, error) {
	d := decoder{b: src, what: "slice reply"}
	d.version(sliceReplyV1)
	r := &sliceReply{}
	r.More = d.replyFlags()
	d.stats(&r.Stats)
	n := d.rowCount()
	if d.err == nil {
		r.Rows = make([]storage.Row, 0, n)
	}
	var slab []storage.Cell
	for i := 0; i < n && d.err == nil; i++ {
		r.Rows = append(r.Rows, d.row(i, n-i, &slab))
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return r, nil
}

func (d *decoder) replyFlags() (more bool) {
	flags := d.byte("flags")
	if d.err == nil && flags&^replyMore != 0 {
		d.fail("unknown flags %#x", flags)
	}
	return flags&replyMore != 0
}

func (d *decoder) stats(s *storage.ReadStats) {
	for i, v := range statsValues(s) {
		*v = d.int(statsFieldNames[i])
	}
}

// rowCount reads a reply's row count. Each row takes at least two bytes:
// never allocate for more rows than the message can hold.
func (d *decoder) rowCount() int {
	n := d.int("row count")
	if d.err == nil && n > len(d.b)/2 {
		d.fail("row count %d exceeds what %d bytes can hold", n, len(d.b))
		return 0
	}
	return n
}

// row reads row i of a reply, left rows before the end included. The
// rows' cells share one slab, sized by the cell count of the row that
// starts it (rows of one table are alike) and by what the bytes left can
// hold (a cell takes at least 6); each row's cells are a full slice of it,
// so an append to one can never reach a neighbour's.
func (d *decoder) row(i, left int, slab *[]storage.Cell) storage.Row {
	row := storage.Row{Clustering: nonNil(d.bytes("clustering key"))}
	cells := d.int("cell count")
	if d.err == nil && (cells == 0 || cells > len(d.b)/6) {
		d.fail("row %d: cell count %d is zero or exceeds what %d bytes can hold", i, cells, len(d.b))
	}
	if d.err != nil {
		return row
	}
	if cap(*slab)-len(*slab) < cells {
		*slab = make([]storage.Cell, 0, max(min(cells*left, len(d.b)/6), cells))
	}
	start := len(*slab)
	for j := 0; j < cells && d.err == nil; j++ {
		c := storage.Cell{Column: d.bytes("column"), Value: d.bytes("value")}
		c.WriteTimeMicros = d.varint("write time")
		c.ExpiresAt = d.varint("expiry")
		ttl := d.varint("ttl")
		if d.err == nil && (ttl < 0 || ttl > math.MaxInt32) {
			d.fail("row %d cell %d: ttl %d is out of range", i, j, ttl)
		}
		c.TTLSeconds = int32(ttl)
		cf := d.byte("cell flags")
		if d.err == nil && cf&^cellCounter != 0 {
			d.fail("row %d cell %d: unknown cell flags %#x", i, j, cf)
		}
		if cf&cellCounter != 0 {
			c.Counter = true
			c.CounterValue = d.varint("counter value")
		}
		*slab = append(*slab, c)
	}
	row.Cells = (*slab)[start:len(*slab):len(*slab)]
	return row
}

// walkRequest is one reader.Walk with what travels with it.
type walkRequest struct {
	Walk       reader.Walk
	Deadline   time.Time // zero: none
	ByteBudget int       // 0: the node's default
}

func appendWalkRequest(dst []byte, r *walkRequest) []byte {
	w := &r.Walk
	dst = appendRequestHead(dst, walkRequestV1, r.Deadline, r.ByteBudget)
	dst = appendBytes(dst, []byte(w.Table))
	dst = appendBounds(dst, w.Reverse, w.Start, w.End)
	dst = binary.AppendUvarint(dst, uint64(max(w.Limit, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(w.MaxTombstones, 0)))
	dst = binary.AppendUvarint(dst, uint64(len(w.Groups)))
	for _, g := range w.Groups {
		dst = binary.AppendUvarint(dst, uint64(len(g)))
		for _, p := range g {
			dst = appendBytes(dst, p)
		}
	}
	return dst
}

// decodeWalkRequest decodes a walk request. Keys alias src.
func decodeWalkRequest(src []byte) (*walkRequest, error) {
	d := decoder{b: src, what: "walk request"}
	r := &walkRequest{}
	r.Deadline, r.ByteBudget = d.requestHead(walkRequestV1)
	r.Walk.Table = string(d.bytes("table"))
	r.Walk.Reverse, r.Walk.Start, r.Walk.End = d.bounds()
	r.Walk.Limit = d.int("limit")
	r.Walk.MaxTombstones = d.int("max tombstones")
	groups := d.int("group count")
	// A group takes at least two bytes, a partition key at least one.
	if d.err == nil && (groups == 0 || groups > len(d.b)/2) {
		d.fail("group count %d is zero or exceeds what %d bytes can hold", groups, len(d.b))
	}
	if d.err == nil {
		r.Walk.Groups = make([][][]byte, 0, groups)
	}
	for g := 0; g < groups && d.err == nil; g++ {
		n := d.int("partition count")
		if d.err == nil && (n == 0 || n > len(d.b)) {
			d.fail("group %d: partition count %d is zero or exceeds what %d bytes can hold", g, n, len(d.b))
		}
		if d.err != nil {
			break
		}
		partitions := make([][]byte, 0, n)
		for range n {
			partitions = append(partitions, d.bytes("partition"))
		}
		r.Walk.Groups = append(r.Walk.Groups, partitions)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return r, nil
}

// walkReply is a decoded walk reply: the rows, and the group of each.
type walkReply struct {
	More       bool
	Stats      storage.ReadStats
	Partitions int
	Groups     []int
	Rows       []storage.Row
	// slab holds the rows' cells (decoder.row); cells is how many the
	// last decode into this reply held, the room its next decode starts
	// with.
	slab  []storage.Cell
	cells int
}

// appendWalkReplyHeader appends a walk reply's version, flags, stats and
// partition count: the part before the row count.
func appendWalkReplyHeader(dst []byte, more bool, t *reader.Trace) []byte {
	dst = append(dst, walkReplyV1)
	var flags byte
	if more {
		flags |= replyMore
	}
	dst = append(dst, flags)
	s := storage.ReadStats{Rows: t.Rows, LiveCells: t.LiveCells, TombstonesScanned: t.Tombstones, MemtablesRead: t.Memtables,
		SSTablesRead: t.SSTables, SSTablesSkipped: t.SSTablesSkipped, SSTablesSkippedByBloom: t.SSTablesSkippedByBloom,
		SSTablesSkippedExpired: t.SSTablesSkippedExpired, BlocksRead: t.Blocks, BlocksSkipped: t.BlocksSkipped}
	for _, v := range statsValues(&s) {
		dst = binary.AppendUvarint(dst, uint64(max(*v, 0)))
	}
	return binary.AppendUvarint(dst, uint64(max(t.Partitions, 0)))
}

// appendWalkRow appends one row of a walk reply and its group.
func appendWalkRow(dst []byte, group int, r *storage.Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(group))
	return appendRow(dst, r)
}

// trace is the reader.Trace a walk reply's stats say.
func (r *walkReply) trace() reader.Trace {
	s := &r.Stats
	return reader.Trace{LiveCells: s.LiveCells, Tombstones: s.TombstonesScanned, SSTables: s.SSTablesRead, SSTablesSkipped: s.SSTablesSkipped,
		Blocks: s.BlocksRead, Memtables: s.MemtablesRead, SSTablesSkippedByBloom: s.SSTablesSkippedByBloom,
		SSTablesSkippedExpired: s.SSTablesSkippedExpired, BlocksSkipped: s.BlocksSkipped, Partitions: r.Partitions, Rows: s.Rows}
}

// decodeWalkReply decodes a walk reply of a walk of groups groups. Keys
// and values alias src.
func decodeWalkReply(src []byte, groups int) (*walkReply, error) {
	r := &walkReply{}
	if err := decodeWalkReplyInto(src, groups, r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeWalkReplyInto is decodeWalkReply into r, reusing its slices (the
// rows, the groups and the cells' slab): what r held before is
// overwritten, so nothing may still use it.
func decodeWalkReplyInto(src []byte, groups int, r *walkReply) error {
	d := decoder{b: src, what: "walk reply"}
	d.version(walkReplyV1)
	// A slab that ran out mid-reply was replaced by one sized for the
	// rows left, and that smaller slab is what r kept: without room for
	// the whole of the last reply up front, a reply a little larger than
	// the one before allocated a slab every time.
	slab := r.slab[:0]
	if cap(slab) < r.cells {
		slab = make([]storage.Cell, 0, r.cells+r.cells/4)
	}
	*r = walkReply{Rows: r.Rows[:0], Groups: r.Groups[:0], slab: slab}
	r.More = d.replyFlags()
	d.stats(&r.Stats)
	r.Partitions = d.int("partitions sliced")
	n := d.rowCount()
	if d.err == nil {
		r.Rows = slices.Grow(r.Rows, n)
		r.Groups = slices.Grow(r.Groups, n)
	}
	last := 0
	for i := 0; i < n && d.err == nil; i++ {
		g := d.int("group index")
		if d.err == nil && (g < last || g >= groups) {
			d.fail("row %d: group %d is not in %d..%d", i, g, last, groups-1)
		}
		last = g
		row := d.row(i, n-i, &r.slab)
		r.Groups = append(r.Groups, g)
		r.Rows = append(r.Rows, row)
		r.cells += len(row.Cells)
	}
	return d.end()
}

// ConsumerPosition is how far one of a node's JetStream consumers has
// applied the event stream: what the data it wrote reflects.
type ConsumerPosition struct {
	AppliedSeq   uint64
	AppliedTime  time.Time // zero when unknown
	Pending      uint64
	PendingKnown bool
}

// NodeFreshness is what a node's freshness endpoint answers.
type NodeFreshness struct {
	// Writer is the event writer's position; Fanout the fan-out worker's,
	// nil when the node runs none.
	Writer *ConsumerPosition
	Fanout *ConsumerPosition
	// Shards is the node's shard count and Owned the shards it stores.
	Shards int
	Owned  []int
}

func appendPosition(dst []byte, p *ConsumerPosition) []byte {
	dst = binary.AppendUvarint(dst, p.AppliedSeq)
	var nanos int64
	if !p.AppliedTime.IsZero() {
		nanos = max(p.AppliedTime.UnixNano(), 1)
	}
	dst = binary.AppendVarint(dst, nanos)
	known := byte(0)
	if p.PendingKnown {
		known = 1
	}
	dst = append(dst, known)
	return binary.AppendUvarint(dst, p.Pending)
}

func appendFreshnessReply(dst []byte, f *NodeFreshness) []byte {
	dst = append(dst, freshnessReplyV1)
	var flags byte
	if f.Writer != nil {
		flags |= freshWriter
	}
	if f.Fanout != nil {
		flags |= freshFanout
	}
	dst = append(dst, flags)
	for _, p := range []*ConsumerPosition{f.Writer, f.Fanout} {
		if p != nil {
			dst = appendPosition(dst, p)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(f.Shards))
	dst = binary.AppendUvarint(dst, uint64(len(f.Owned)))
	for _, s := range f.Owned {
		dst = binary.AppendUvarint(dst, uint64(s))
	}
	return dst
}

func (d *decoder) position() *ConsumerPosition {
	p := &ConsumerPosition{AppliedSeq: d.uvarint("applied sequence")}
	if nanos := d.varint("applied time"); nanos != 0 {
		p.AppliedTime = time.Unix(0, nanos).UTC()
	}
	switch known := d.byte("pending known"); known {
	case 0:
	case 1:
		p.PendingKnown = true
	default:
		d.fail("pending known is %d, want 0 or 1", known)
	}
	p.Pending = d.uvarint("pending")
	return p
}

func decodeFreshnessReply(src []byte) (*NodeFreshness, error) {
	d := decoder{b: src, what: "freshness reply"}
	d.version(freshnessReplyV1)
	f := &NodeFreshness{}
	flags := d.byte("flags")
	if d.err == nil && flags&^(freshWriter|freshFanout) != 0 {
		d.fail("unknown flags %#x", flags)
	}
	if flags&freshWriter != 0 {
		f.Writer = d.position()
	}
	if flags&freshFanout != 0 {
		f.Fanout = d.position()
	}
	f.Shards = d.int("shard count")
	if d.err == nil && (f.Shards < 1 || f.Shards > maxShards) {
		d.fail("shard count %d is not in 1..%d", f.Shards, maxShards)
	}
	n := d.int("owned shard count")
	if d.err == nil && n > f.Shards {
		d.fail("%d owned shards of %d", n, f.Shards)
	}
	for i := 0; i < n && d.err == nil; i++ {
		s := d.int("owned shard")
		if d.err == nil && s >= f.Shards {
			d.fail("owned shard %d is not below the shard count %d", s, f.Shards)
		}
		f.Owned = append(f.Owned, s)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return f, nil
}

func appendHealthReply(dst []byte, err error) []byte {
	dst = append(dst, healthReplyV1)
	if err == nil {
		dst = append(dst, 1)
		return appendBytes(dst, nil)
	}
	dst = append(dst, 0)
	return appendBytes(dst, []byte(err.Error()))
}

// decodeHealthReply returns nil when the node says it is ready, else an
// error with its detail; a malformed reply is an error wrapping
// ErrBadMessage.
func decodeHealthReply(src []byte) (notReady error, err error) {
	d := decoder{b: src, what: "health reply"}
	d.version(healthReplyV1)
	ready := d.byte("ready")
	if d.err == nil && ready > 1 {
		d.fail("ready is %d, want 0 or 1", ready)
	}
	detail := d.bytes("detail")
	if err := d.end(); err != nil {
		return nil, err
	}
	if ready == 1 {
		return nil, nil
	}
	if len(detail) == 0 {
		detail = []byte("not ready")
	}
	return errors.New(string(detail)), nil
}
