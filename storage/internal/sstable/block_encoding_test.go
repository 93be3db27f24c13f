package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

func TestShapeValue(t *testing.T) {
	const h = "\xff"
	cases := []struct {
		name, value, shape string
		holes              []string
	}{
		{"object", `{"user":"u1","n":42,"ok":true,"x":null}`, `{"user":"` + h + `","n":` + h + `,"ok":` + h + `,"x":` + h + `}`, []string{"u1", "42", "true", "null"}},
		{"nested and arrays", `{"a":{"b":[1,"two",-3.5e2]},"c":[]}`, `{"a":{"b":[` + h + `,"` + h + `",` + h + `]},"c":[]}`, []string{"1", "two", "-3.5e2"}},
		{"escaped quote and backslash", `{"s":"say \"hi\\"}`, `{"s":"` + h + `"}`, []string{`say \"hi\\`}},
		{"key with spaces before the colon", "{ \"k\" \t: \"v\" }", "{ \"k\" \t: \"" + h + "\" }", []string{"v"}},
		{"empty string", `{"e":""}`, `{"e":"` + h + `"}`, []string{""}},
		{"top-level string", `"just text"`, `"` + h + `"`, []string{"just text"}},
		{"not JSON", `hello, world`, h + `, ` + h, []string{"hello", "world"}},
		{"holds 0xff", "{\"a\":\"\xff\"}", h, []string{"{\"a\":\"\xff\"}"}},
		{"unterminated string", `{"a":"b`, h, []string{`{"a":"b`}},
		{"too many holes", "[" + strings.Repeat("1,", maxValueHoles) + "1]", h, []string{"[" + strings.Repeat("1,", maxValueHoles) + "1]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shape, spans := shapeValue([]byte(tc.value), nil, nil)
			var holes []string
			for _, sp := range spans {
				holes = append(holes, tc.value[sp[0]:sp[1]])
			}
			if string(shape) != tc.shape || !slices.Equal(holes, tc.holes) {
				t.Fatalf("shapeValue(%q) = %q %q, want %q %q", tc.value, shape, holes, tc.shape, tc.holes)
			}
		})
	}
}

// descendingEvents is eventPartition with its keys complemented, as a
// DESC clustering column stores them, and sorted accordingly; every 7th
// value is not JSON and every 11th holds a 0xFF byte.
func descendingEvents(rng *rand.Rand, key []byte, events int) testPartition {
	p := eventPartition(rng, key, events)
	for i := range p.cells {
		c := &p.cells[i]
		for j := range c.Clustering {
			c.Clustering[j] = ^c.Clustering[j]
		}
		switch {
		case i%11 == 0:
			c.Value = append(c.Value[:len(c.Value)-1], 0xff, '}')
		case i%7 == 0:
			c.Value = randomValue(rng, 1+rng.IntN(40))
		}
	}
	slices.SortFunc(p.cells, func(a, b base.Cell) int { return bytes.Compare(a.Clustering, b.Clustering) })
	return p
}

// blockHeaderEncodings returns the encodings byte of a version 2 block and
// its timestamps section length.
func blockHeaderEncodings(t *testing.T, raw []byte) (enc byte, tsLen int) {
	t.Helper()
	c := cursor{b: raw}
	c.uvarint("cells")
	c.uvarint("rows")
	c.varint("base")
	c.varint("ttl")
	n := c.length("columns", 1)
	for i := 0; i < n; i++ {
		c.bytes("column")
	}
	enc = c.byte1("encodings")
	c.uvarint("row keys")
	c.uvarint("column indexes")
	tsLen = int(c.uvarint("timestamps"))
	if c.err != nil {
		t.Fatal(c.err)
	}
	return enc, tsLen
}

func TestBlockEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 0))
	events := eventPartition(rng, []byte("p"), 100).cells
	// Real TimeUUID keys: ticks since 1582 in the low 60 bits, version 1.
	uuidKey := func(ts int64, node uint64, desc bool) []byte {
		k := timeUUIDKey(1<<60|uint64(ts*10+uuidUnixEpochTicks), node)
		if desc {
			for i := range k {
				k[i] = ^k[i]
			}
		}
		return k
	}
	withKeys := func(desc bool) []base.Cell {
		out := slices.Clone(events)
		for i := range out {
			out[i].Clustering = uuidKey(out[i].Timestamp, rng.Uint64(), desc)
		}
		slices.SortFunc(out, func(a, b base.Cell) int { return bytes.Compare(a.Clustering, b.Clustering) })
		return out
	}
	shortKeys := slices.Clone(events)
	for i := range shortKeys {
		shortKeys[i].Clustering = binary.BigEndian.AppendUint32(nil, uint32(i))
	}
	mixedKeys := slices.Clone(events)
	for i := range mixedKeys {
		mixedKeys[i].Clustering = fmt.Appendf(nil, "row-%d", i*i)
	}
	slices.SortFunc(mixedKeys, func(a, b base.Cell) int { return bytes.Compare(a.Clustering, b.Clustering) })
	unrelated := withKeys(false)
	for i := range unrelated {
		unrelated[i].Timestamp = 1_000_000 + int64(i)*1000 + rng.Int64N(10)
	}
	binary := slices.Clone(unrelated)
	for i := range binary {
		binary[i].Value = randomValue(rng, 30)
	}
	cases := []struct {
		name   string
		cells  []base.Cell
		shape  bool
		keys   int
		ts     int
		shaped bool
		noTS   bool // every timestamp predicted: an empty timestamps section
	}{
		{"TimeUUID keys, write time = event time", withKeys(false), true, rowKeysFixed, tsFromTimeUUID, true, true},
		{"inverted TimeUUID keys", withKeys(true), true, rowKeysFixed, tsFromTimeUUIDDesc, true, true},
		{"TimeUUID keys, times unrelated", unrelated, true, rowKeysFixed, tsFromPrevious, true, false},
		{"short keys", shortKeys, false, rowKeysPrefix, tsFromPrevious, false, false},
		{"keys of mixed length", mixedKeys, true, rowKeysPrefix, tsFromPrevious, true, false},
		{"values that are not JSON", binary, true, rowKeysFixed, tsFromPrevious, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := blockBuilder{shapeValues: tc.shape}
			for i := range tc.cells {
				b.add(&tc.cells[i], false)
			}
			raw, meta, _ := b.finish(nil)
			enc, tsLen := blockHeaderEncodings(t, raw)
			if got := int(enc & encRowKeysMask); got != tc.keys {
				t.Errorf("row key encoding %d, want %d", got, tc.keys)
			}
			if got := int(enc&encTimestampMask) >> encTimestampShift; got != tc.ts {
				t.Errorf("timestamp predictor %d, want %d", got, tc.ts)
			}
			if got := enc&encValuesShaped != 0; got != tc.shaped {
				t.Errorf("shaped values %v, want %v", got, tc.shaped)
			}
			if tc.noTS && tsLen != 0 {
				t.Errorf("timestamps section of %d bytes, want none", tsLen)
			}
			blk, tail, err := decodeBlock(raw, formatVersion2)
			if err != nil || len(tail) != 0 {
				t.Fatalf("decodeBlock: %v (%d trailing bytes)", err, len(tail))
			}
			if d := diffCells(blk.allCells(), tc.cells); d != "" {
				t.Fatal(d)
			}
			if err := checkBlockMeta(&blk.meta, &meta); err != nil {
				t.Fatal(err)
			}
			if blk.aliasesRaw == tc.shaped {
				t.Errorf("aliasesRaw = %v for shaped = %v", blk.aliasesRaw, tc.shaped)
			}
		})
	}
}

// TestReadsFormatVersion1 reads a file written by the version 1 writer
// (commit 0553217, testdata/v1): the same seeds give the same partitions.
func TestReadsFormatVersion1(t *testing.T) {
	checkOldFile(t, "testdata/v1/random-and-events.sst", 7, formatVersion1)
}

// TestReadsFormatVersion2 reads a file written by the version 2 writer
// (commit cafb4ec, testdata/v2), before tombstone statistics and
// fragmented range tombstones.
func TestReadsFormatVersion2(t *testing.T) {
	checkOldFile(t, "testdata/v2/random-and-events.sst", 9, formatVersion2)
}

// TestReadsFormatVersion3 reads a file written by the version 3 writer
// (commit cf109dc, testdata/v3), whose partition and block indexes are
// whole meta blocks, kept resident, before index pages.
func TestReadsFormatVersion3(t *testing.T) {
	checkOldFile(t, "testdata/v3/random-and-events.sst", 11, formatVersion3)
}

// TestReadsFormatVersion4 reads a file written by the version 4 writer
// (commit 47b4fde, testdata/v4; 2 KiB blocks, so it has several index
// pages), before per-file zstd dictionaries.
func TestReadsFormatVersion4(t *testing.T) {
	checkOldFile(t, "testdata/v4/random-and-events.sst", 13, formatVersion4)
}

// TestReadsFormatVersion5 reads a file written by the first version 5
// writer (testdata/v5; 2 KiB blocks, several index pages), whose data
// blocks are compressed against its dictionary.
func TestReadsFormatVersion5(t *testing.T) {
	r := checkOldFile(t, "testdata/v5/random-and-events.sst", 17, formatVersion5)
	if r.dict == nil || len(r.dict.content) != 32<<10 {
		t.Fatal("the version 5 fixture has no 32 KiB dictionary")
	}
}

func checkOldFile(t *testing.T, path string, seed uint64, version uint32) *Reader {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	parts := randomTable(rng, 12, 80)
	parts = append(parts, eventPartition(rng, []byte("zz|events"), 400))
	r := openTable(t, &memFile{data: data}, NewCache(1<<20))
	t.Cleanup(func() { r.Close() })
	if v := r.Properties().FormatVersion; v != version {
		t.Fatalf("FormatVersion = %d, want %d", v, version)
	}
	// Older writers stored ranges as given; the properties still count
	// them so, while the reader hands them out fragmented.
	var raw, frags int64
	for _, p := range parts {
		raw += int64(len(p.del.Ranges))
		frags += int64(len(base.FragmentRanges(p.del.Ranges)))
	}
	want := wantProperties(parts, CompressionZstd)
	if version >= formatVersion3 {
		// Version 3 writers fragment ranges and keep tombstone
		// statistics (its file was written at CreatedAt 0, as the
		// test writer does).
		if got := r.Properties().RangeTombstones; got != frags {
			t.Fatalf("RangeTombstones = %d, want %d fragments", got, frags)
		}
		checkTable(t, r, parts, CompressionZstd)
		return r
	}
	if got := r.Properties().RangeTombstones; got != raw {
		t.Fatalf("RangeTombstones = %d, want %d as written", got, raw)
	}
	if ts := r.Properties().Tombstones; ts.Deletions.Total() != 0 || ts.CreatedAt != 0 {
		t.Fatalf("a version %d file has tombstone statistics: %+v", version, ts)
	}
	r.props.RangeTombstones = frags
	r.props.Tombstones = want.Tombstones
	checkTable(t, r, parts, CompressionZstd)
	return r
}

// TestShapedValuesLimits checks the decoder's bounds on shaped values.
func TestShapedValuesLimits(t *testing.T) {
	// One 1000-byte shape shared by 2000 one-hole values expands to
	// 2 MB from a few kilobytes.
	shape := append(bytes.Repeat([]byte("x"), 1000), holeByte)
	var sec []byte
	sec = binary.AppendUvarint(sec, 1)
	sec = appendBytes(sec, shape)
	sec = appendUintColumn(sec, make([]uint64, 2000))
	sec = appendBytes(sec, nil)
	sec = appendUintColumn(sec, make([]uint64, 2000))
	if _, _, err := decodeShapedValues(sec, nil, 2000, 1<<20, nil); err == nil {
		t.Fatal("a block expanding past the limit decoded")
	}
	if vals, lens, err := decodeShapedValues(sec, nil, 2000, 4<<20, nil); err != nil || len(vals) != 2000*1000 || lens[0] != 1000 {
		t.Fatalf("within the limit: %d bytes, err %v", len(vals), err)
	}
	// An empty value is refused (empty values have their own flag).
	sec = binary.AppendUvarint(nil, 1)
	sec = appendBytes(sec, []byte{holeByte})
	sec = appendUintColumn(sec, []uint64{0})
	sec = appendBytes(sec, nil)
	sec = appendUintColumn(sec, []uint64{0})
	if _, _, err := decodeShapedValues(sec, nil, 1, 1<<20, nil); err == nil {
		t.Fatal("an empty value decoded")
	}
}

// TestShapedValuesRecycledBuffer decodes a block of shaped values into a
// fresh buffer and into a recycled one full of garbage, larger and exactly
// as large as the values need (with and without the scratch copyShort
// writes into): the values must be the same. Values mix pieces shorter
// and longer than copyShort's 16 bytes, and the last value's last hole
// ends the values section.
func TestShapedValuesRecycledBuffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	p := eventPartition(rng, []byte("p"), 120)
	for i := range p.cells {
		if i%7 == 3 {
			// A long scalar: a hole longer than 16 bytes.
			p.cells[i].Value = fmt.Appendf(nil, `{"id":"%s","n":%d}`, bytes.Repeat([]byte("abcdef"), 1+i%9), i)
		}
	}
	p.cells[len(p.cells)-1].Value = []byte(`{"k":"` + strings.Repeat("z", 40) + `"}`)
	bb := blockBuilder{shapeValues: true}
	for i := range p.cells {
		bb.add(&p.cells[i], i > 0 && bytes.Equal(p.cells[i-1].Clustering, p.cells[i].Clustering))
	}
	raw, _, _ := bb.finish(nil)
	fresh, _, err := decodeBlockInto(raw, formatVersion2, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.aliasesRaw {
		t.Fatal("the block's values were not shaped")
	}
	want := fresh.allCells()
	if d := diffCells(want, p.cells); d != "" {
		t.Fatalf("fresh decode differs from the cells written: %s", d)
	}
	total := len(fresh.data)
	for _, size := range []int{total, total + copySlack, total + 1000} {
		garbage := bytes.Repeat([]byte{0xAA}, size)
		// Recycled key buffers too: one too small, one with room.
		keys := bytes.Repeat([]byte{0xBB}, size/4)
		blk, _, err := decodeBlockInto(raw, formatVersion2, nil, garbage[:0], keys[:0])
		if err != nil {
			t.Fatalf("recycled buffer of %d bytes: %v", size, err)
		}
		if d := diffCells(blk.allCells(), want); d != "" {
			t.Fatalf("recycled buffer of %d bytes: %s", size, d)
		}
	}
}

// TestPlanesSum checks the plane-by-plane sum of a uint column against the
// integers read one by one, for every width, and that it declines widths
// and constants whose sum could overflow.
func TestPlanesSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for w := 1; w <= 8; w++ {
		vals := make([]uint64, 300)
		for i := range vals {
			vals[i] = rng.Uint64() >> (64 - 8*w)
		}
		vals[0] = 1<<(8*w) - 1 // the width is w
		sec := appendPlanes(nil, vals)
		p, err := decodePlanes(sec, len(vals), "test")
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		for _, v := range vals {
			want += v
		}
		got, ok := p.sum()
		if w > 4 {
			if ok {
				t.Fatalf("width %d: sum claimed ok", w)
			}
			continue
		}
		if !ok || got != want {
			t.Fatalf("width %d: got %d (ok %v), want %d", w, got, ok, want)
		}
		for i, v := range vals {
			if got := p.next(); got != v {
				t.Fatalf("width %d: integer %d is %d, want %d", w, i, got, v)
			}
		}
	}
	for _, tc := range []struct {
		constant uint64
		ok       bool
	}{{7, true}, {math.MaxUint32, true}, {math.MaxUint32 + 1, false}} {
		c := cursor{b: binary.AppendUvarint([]byte{0}, tc.constant)}
		p := uintColumn(&c, 1000, "test")
		got, ok := p.sum()
		if ok != tc.ok || ok && got != tc.constant*1000 {
			t.Fatalf("constant %d: got %d (ok %v), want ok %v", tc.constant, got, ok, tc.ok)
		}
	}
}

// TestShapedValuesColumnLengths checks that a hole column whose lengths
// add up to more than the values section holds is refused, whether its
// lengths are byte planes or one constant too large to sum by planes.
func TestShapedValuesColumnLengths(t *testing.T) {
	for _, lens := range [][]uint64{{5, 5}, {1 << 40, 1 << 40}, {3, 4}} {
		sec := binary.AppendUvarint(nil, 1)
		sec = appendBytes(sec, []byte{holeByte})
		sec = appendUintColumn(sec, []uint64{0, 0})
		sec = appendBytes(sec, nil)
		sec = appendUintColumn(sec, lens)
		_, _, err := decodeShapedValues(sec, []byte("abcdef"), 2, 1<<20, nil)
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("lengths %v over 6 bytes of values: got %v, want corruption", lens, err)
		}
	}
	// Lengths that add up exactly decode.
	sec := binary.AppendUvarint(nil, 1)
	sec = appendBytes(sec, []byte{holeByte})
	sec = appendUintColumn(sec, []uint64{0, 0})
	sec = appendBytes(sec, nil)
	sec = appendUintColumn(sec, []uint64{2, 4})
	vals, lens, err := decodeShapedValues(sec, []byte("abcdef"), 2, 1<<20, nil)
	if err != nil || string(vals) != "abcdef" || lens[0] != 2 || lens[1] != 4 {
		t.Fatalf("got %q %v %v", vals, lens, err)
	}
}

// TestZstdPartsAtLeastMinimum checks where the writer ends zstd blocks in
// a data block of shaped JSON events: before the shapes and at hole
// columns, but never after a part of fewer than minZstdPart bytes.
func TestZstdPartsAtLeastMinimum(t *testing.T) {
	for _, tc := range []struct {
		splits, want []int
	}{
		{nil, nil},
		{[]int{100}, nil},
		{[]int{600, 700, 1200, 1300, 5000}, []int{600, 1200, 5000}},
		{[]int{512, 1024, 1535}, []int{512, 1024}},
	} {
		if got := mergeSmallParts(slices.Clone(tc.splits)); !slices.Equal(got, tc.want) {
			t.Errorf("mergeSmallParts(%v) = %v, want %v", tc.splits, got, tc.want)
		}
	}
	// Events with a two-letter country: a 320-byte column.
	rng := rand.New(rand.NewPCG(31, 32))
	p := eventPartition(rng, []byte("p"), 160)
	b := blockBuilder{shapeValues: true}
	for i := range p.cells {
		c := p.cells[i]
		c.Value = fmt.Appendf(nil, `{"session":"%016x","country":"%s","page":"/p/%d/item/%d"}`,
			rng.Uint64(), []string{"de", "fr", "us", "jp"}[rng.IntN(4)], rng.IntN(50), rng.IntN(10000))
		b.add(&c, false)
	}
	raw, _, splits := b.finish(nil)
	if len(splits) < 2 {
		t.Fatalf("got %d splits in a %d-byte block of shaped values, want the shapes and columns split", len(splits), len(raw))
	}
	prev := 0
	for _, sp := range splits {
		if sp-prev < minZstdPart || sp >= len(raw) {
			t.Fatalf("splits %v of a %d-byte block: a part of %d bytes at %d", splits, len(raw), sp-prev, prev)
		}
		prev = sp
	}
}

// TestHeadBlocksS2 checks that a zstd file compresses the first block of
// each partition of several blocks with S2 and every other data block
// with zstd (a partition of one block included), and that ZstdHeadBlocks
// keeps head blocks zstd; both read back the same cells.
func TestHeadBlocksS2(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	parts := []testPartition{
		eventPartition(rng, []byte("a-large"), 600),
		eventPartition(rng, []byte("b-small"), 10),
		eventPartition(rng, []byte("c-large"), 400),
	}
	for _, zstdHeads := range []bool{false, true} {
		f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd, NoDictionary: true, ZstdHeadBlocks: zstdHeads})
		r := openTable(t, f, nil)
		var got []string
		for j := range r.top.pages {
			pg, err := r.page(j, fromDisk)
			if err != nil {
				t.Fatal(err)
			}
			w := pg.parts.walker()
			for {
				e, ok, err := w.next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				for i := e.info.firstBlock; i < e.info.firstBlock+e.info.numBlocks; i++ {
					h := pg.blocks.handle(i)
					c := Compression(f.data[pg.blocks.fileOffs[i]+h.storedLen])
					got = append(got, fmt.Sprintf("%s/%d:%s", w.key, i-e.info.firstBlock, c))
				}
			}
		}
		checkTable(t, r, parts, CompressionZstd)
		r.Close()
		for _, s := range got {
			head := strings.HasSuffix(strings.Split(s, ":")[0], "/0") && !strings.HasPrefix(s, "b-small")
			want := "zstd"
			if head && !zstdHeads {
				want = "s2"
			}
			if !strings.HasSuffix(s, ":"+want) {
				t.Fatalf("ZstdHeadBlocks=%v: blocks %v: want %s for %s", zstdHeads, got, want, s)
			}
		}
		if len(got) < 5 {
			t.Fatalf("blocks %v: want the large partitions in several", got)
		}
	}
}

// TestExpandFixedKeys checks the fixed-width row key expansion against
// the definition (running sums of the deltas, tails transposed back) for
// every delta width, constant deltas, and key lengths with and without
// the 8-byte tail the expansion gathers in one store.
func TestExpandFixedKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, tc := range []struct {
		name     string
		deltaMax uint64 // 0: every delta is constDelta
		constant uint64
		keyLen   int
		rows     int
	}{
		{"one row", 1 << 20, 0, 16, 1},
		{"constant deltas", 0, 7, 16, 50},
		{"constant zero deltas", 0, 0, 9, 5},
		{"1-byte deltas", 1 << 8, 0, 16, 163},
		{"2-byte deltas", 1 << 16, 0, 16, 163},
		{"3-byte deltas", 1 << 24, 0, 16, 40},
		{"4-byte deltas", 1 << 32, 0, 16, 163},
		{"5-byte deltas", 1 << 40, 0, 16, 40},
		{"8-byte deltas", 1<<63 - 1, 0, 16, 3},
		{"no tail", 1 << 16, 0, 8, 30},
		{"3-byte tail", 1 << 24, 0, 11, 30},
		{"12-byte tail", 1 << 16, 0, 20, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := rng.Uint64() >> 1
			deltas := make([]uint64, tc.rows-1)
			for i := range deltas {
				if tc.deltaMax == 0 {
					deltas[i] = tc.constant
				} else {
					deltas[i] = rng.Uint64N(tc.deltaMax)
				}
			}
			if tc.deltaMax > 0 && len(deltas) > 0 {
				deltas[0] = tc.deltaMax - 1 // the full width
			}
			tail := tc.keyLen - 8
			rest := make([]byte, tail*tc.rows)
			for i := range rest {
				rest[i] = byte(rng.Uint32())
			}
			want := make([]byte, tc.rows*tc.keyLen)
			v := first
			for r := 0; r < tc.rows; r++ {
				if r > 0 {
					v += deltas[r-1]
				}
				binary.BigEndian.PutUint64(want[r*tc.keyLen:], v)
				for i := 0; i < tail; i++ {
					want[r*tc.keyLen+8+i] = rest[i*tc.rows+r]
				}
			}
			var p planes
			if tc.deltaMax == 0 {
				p = planes{n: len(deltas), constant: tc.constant}
			} else if len(deltas) > 0 {
				var err error
				if p, err = decodePlanes(appendPlanes(nil, deltas), len(deltas), "deltas"); err != nil {
					t.Fatal(err)
				}
			}
			got := make([]byte, len(want))
			expandFixedKeys(got, first, &p, rest, tc.rows, tc.keyLen)
			if !bytes.Equal(got, want) {
				t.Fatalf("keys differ:\ngot  %x\nwant %x", got, want)
			}
		})
	}
}
