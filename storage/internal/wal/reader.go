package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

// ReplayResult describes what Replay read and repaired.
type ReplayResult struct {
	// Segments are the segments replayed, ascending.
	Segments []uint64
	// Records is the number of records passed to fn.
	Records int
	// LastSegment is the highest segment replayed, or 0 when there was none
	// (segment numbers start at 1).
	LastSegment uint64
	// TruncatedBytes is the size of the torn tail cut from the last segment
	// (truncated away in a version 1 segment, overwritten with zeros in a
	// version 2 one), TruncatedSegment that segment's number and
	// TruncatedOffset where the cut began; all are 0 when the log ended
	// cleanly. TruncatedReason says what the cut bytes looked like.
	//
	// In a version 2 segment the cut is at most one record that was not
	// intact, followed only by zeros, in a segment that was not sealed by a
	// clean Close. It is the end of the last group commit before a crash,
	// which is either unacknowledged (a torn write) or acknowledged and
	// damaged since: the two look the same on disk, so the caller must
	// check its own record of what was acknowledged.
	TruncatedBytes   int64
	TruncatedSegment uint64
	TruncatedOffset  int64
	TruncatedReason  string
}

// Replay reads every segment in dir numbered minSegment or above, in
// ascending order, and calls fn for each record in log order. rec aliases a
// read buffer and is valid only during the call.
//
// A torn tail of the last segment, the unsynced end of a write cut short by a
// crash, is repaired (the file is fixed and synced) and reported in the
// result. In a version 2 segment (see record.go) a torn tail is: a file that
// ends inside its header or holds nothing past it (interrupted creation), or
// one damaged record with a sane length, followed only by zeros, with no
// intact record inside it, in a segment not sealed by a clean Close; its
// bytes are zeroed, keeping the preallocated size. In a version 1 segment it
// is what it always was: the file ends inside the header or a record, the
// final record fails its checksum and only zero bytes or nothing follow it,
// or the rest of the file is zero bytes, but never when an intact record
// follows the damage; the tail is truncated. Everything else that does not
// decode (a version 2 file shorter than its preallocated size, damage
// before the tail, any damage in a sealed segment or in a segment that is
// not the last, a bad segment header, a missing segment between two present
// ones) is an error wrapping base.ErrCorruption that names the file and byte
// offset; nothing is repaired then. An empty segment file holds no records.
// An error from fn stops replay and is returned wrapped. On any error, fn
// may already have seen the records before it.
func Replay(fs vfs.FS, dir string, minSegment uint64, fn func(segment uint64, offset int64, rec []byte) error) (ReplayResult, error) {
	var res ReplayResult
	all, err := ListSegments(fs, dir)
	if err != nil {
		return res, fmt.Errorf("cannot replay wal: %w", err)
	}
	var nums []uint64
	for _, num := range all {
		if num >= minSegment {
			nums = append(nums, num)
		}
	}
	for i, num := range nums {
		if i > 0 && num != nums[i-1]+1 {
			// Segments are only ever deleted oldest first, so a hole means
			// records were lost.
			return res, base.CorruptionErrorf("wal segment %s is missing at offset 0: %s is followed by %s",
				segmentPath(dir, nums[i-1]+1), SegmentFileName(nums[i-1]), SegmentFileName(num))
		}
		res.Segments = append(res.Segments, num)
		res.LastSegment = num
		last := i == len(nums)-1
		n, torn, err := replaySegment(fs, dir, num, last, fn)
		res.Records += n
		if err != nil {
			return res, err
		}
		if torn != nil && torn.size > torn.offset {
			res.TruncatedSegment = num
			res.TruncatedBytes = torn.size - torn.offset
			res.TruncatedOffset = torn.offset
			res.TruncatedReason = torn.why
		}
	}
	return res, nil
}

// replaySegment replays one segment and, when it is the last and its tail is
// torn, truncates the tail.
func replaySegment(fs vfs.FS, dir string, num uint64, last bool, fn func(uint64, int64, []byte) error) (records int, torn *tornTailError, err error) {
	path := segmentPath(dir, num)
	f, err := fs.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot open wal segment %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, nil, fmt.Errorf("cannot stat wal segment %s: %w", path, err)
	}
	r := newSegmentReader(f, st.Size(), path, num, last)
	for {
		rec, off, err := r.next()
		if err == io.EOF {
			break
		}
		if errors.As(err, &torn) {
			break
		}
		if err != nil {
			f.Close()
			return records, nil, err
		}
		if err := fn(num, off, rec); err != nil {
			f.Close()
			return records, nil, fmt.Errorf("cannot replay wal record at %s offset %d: %w", path, off, err)
		}
		records++
	}
	if err := f.Close(); err != nil {
		return records, nil, fmt.Errorf("cannot close wal segment %s: %w", path, err)
	}
	if torn != nil {
		var err error
		switch {
		case torn.extendTo > 0:
			err = extendSegment(fs, path, torn.extendTo)
		case torn.zero:
			err = zeroSegmentRange(fs, path, torn.offset, torn.size)
		default:
			err = truncateSegment(fs, path, torn.offset)
		}
		if err != nil {
			return records, nil, err
		}
	}
	return records, torn, nil
}

// zeroSegmentRange overwrites bytes [from, to) of a version 2 segment with
// zeros and syncs it: the file keeps its preallocated size, so the next
// replay sees records followed by zeros, a clean end.
func zeroSegmentRange(fs vfs.FS, path string, from, to int64) error {
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("cannot open wal segment %s to clear its torn tail: %w", path, err)
	}
	wa, ok := f.(io.WriterAt)
	if !ok {
		f.Close()
		return fmt.Errorf("cannot clear torn tail of wal segment %s: the filesystem's files cannot write at an offset", path)
	}
	zeros := make([]byte, min(to-from, readChunkSize))
	for off := from; off < to; {
		n := min(to-off, int64(len(zeros)))
		if _, err := wa.WriteAt(zeros[:n], off); err != nil {
			f.Close()
			return fmt.Errorf("cannot clear torn tail of wal segment %s at offset %d: %w", path, off, err)
		}
		off += n
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cannot sync wal segment %s after clearing its torn tail: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot close wal segment %s: %w", path, err)
	}
	return nil
}

// extendSegment restores the preallocated size of a version 2 segment whose
// creation was interrupted before its size was synced.
func extendSegment(fs vfs.FS, path string, size int64) error {
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("cannot open wal segment %s to restore its preallocated size: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("cannot restore wal segment %s to its preallocated %d bytes: %w", path, size, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cannot sync wal segment %s after restoring its size: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot close wal segment %s: %w", path, err)
	}
	return nil
}

func truncateSegment(fs vfs.FS, path string, size int64) error {
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("cannot open wal segment %s to truncate its torn tail: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("cannot truncate torn tail of wal segment %s at offset %d: %w", path, size, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cannot sync wal segment %s after truncating it: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot close wal segment %s: %w", path, err)
	}
	return nil
}

// tornTailError reports that the last segment's records end at offset and
// the bytes from there to size are the remains of an interrupted write.
// Version 1 segments are truncated at offset; version 2 segments keep their
// size and have [offset, size) zeroed (zero), or, when their creation was
// interrupted, are extended back to their preallocated size (extendTo).
type tornTailError struct {
	path         string
	offset, size int64
	why          string
	zero         bool
	extendTo     int64
}

func (e *tornTailError) Error() string {
	return fmt.Sprintf("torn tail of wal segment %s at offset %d (%d bytes): %s", e.path, e.offset, e.size-e.offset, e.why)
}

// readChunkSize is how much segmentReader reads at a time: large enough that
// replay is sequential I/O, small enough not to matter in memory.
const readChunkSize = 256 << 10

// segmentReader decodes the records of one segment file in order.
type segmentReader struct {
	r    io.ReaderAt
	size int64
	path string
	num  uint64
	// last says whether this is the newest segment, the only one that may
	// end in a torn write.
	last bool

	headerDone bool
	hdr        segmentHeader
	off        int64 // offset of the next record

	// buf holds file bytes [bufOff, bufOff+len(buf)).
	buf    []byte
	bufOff int64
}

func newSegmentReader(r io.ReaderAt, size int64, path string, num uint64, last bool) *segmentReader {
	return &segmentReader{r: r, size: size, path: path, num: num, last: last}
}

// next returns the next record's payload (valid until the following call)
// and offset. At the clean end of the segment it returns io.EOF; at a torn
// tail of the last segment a *tornTailError; otherwise an error wrapping
// base.ErrCorruption or an I/O error.
func (r *segmentReader) next() (payload []byte, offset int64, err error) {
	if !r.headerDone {
		if err := r.readHeader(); err != nil {
			return nil, 0, err
		}
		r.headerDone = true
	}
	if r.hdr.version >= formatVersion3 {
		return r.nextV3()
	}
	if r.off == r.size {
		return nil, 0, r.end()
	}
	remaining := r.size - r.off
	hdrLen := int(min(remaining, recordHeaderSize))
	hdr, err := r.window(r.off, hdrLen)
	if err != nil {
		return nil, 0, err
	}
	if r.hdr.version >= formatVersion2 && allZero(hdr) {
		// In version 2 the records end where only zeros follow.
		if zero, err := r.zeroFrom(r.off); err != nil {
			return nil, 0, err
		} else if zero {
			return nil, 0, r.end()
		}
	}
	if hdrLen < recordHeaderSize {
		return nil, 0, r.damaged(r.off, errIncompleteRecord, "incomplete record header")
	}
	length, err := recordLength(hdr)
	if err != nil {
		return nil, 0, r.damaged(r.off, err, fmt.Sprintf("record length %d above the %d byte limit", binary.LittleEndian.Uint32(hdr[recordLengthOffset:]), MaxRecordSize))
	}
	if int64(recordHeaderSize+length) > remaining {
		return nil, 0, r.damaged(r.off, errIncompleteRecord,
			fmt.Sprintf("record of %d bytes runs past the end of the file at %d", recordHeaderSize+length, r.size))
	}
	buf, err := r.window(r.off, recordHeaderSize+length)
	if err != nil {
		return nil, 0, err
	}
	payload, n, err := decodeRecord(buf)
	if err != nil {
		return nil, 0, r.damaged(r.off, err, fmt.Sprintf("record checksum mismatch (record length %d)", length))
	}
	offset = r.off
	r.off += int64(n)
	return payload, offset, nil
}

// nextV3 is next for a version 3 segment (see record.go): the records end
// at the first bytes that do not name this segment, which in a recycled
// segment are an older generation's records rather than zeros.
func (r *segmentReader) nextV3() (payload []byte, offset int64, err error) {
	if r.hdr.sealed != 0 {
		if r.off == r.hdr.sealed {
			return nil, 0, io.EOF
		}
		if r.off > r.hdr.sealed {
			return nil, 0, base.CorruptionErrorf("wal segment %s: record at offset %d runs past the sealed end %d",
				r.path, r.off, r.hdr.sealed)
		}
	}
	remaining := r.size - r.off
	if remaining < recordHeaderSizeV3 {
		return nil, 0, r.endV3()
	}
	hdr, err := r.window(r.off, recordHeaderSizeV3)
	if err != nil {
		return nil, 0, err
	}
	ours := binary.LittleEndian.Uint64(hdr[recordSegmentOffset:]) == r.num
	length := int64(binary.LittleEndian.Uint32(hdr[recordLengthOffset:]))
	if length > MaxRecordSize || recordHeaderSizeV3+length > remaining {
		if !ours {
			return nil, 0, r.endV3()
		}
		what := fmt.Sprintf("record of %d bytes runs past the end of the file at %d", recordHeaderSizeV3+length, r.size)
		end := min(r.size, r.off+recordHeaderSizeV3+length)
		if length > MaxRecordSize {
			what = fmt.Sprintf("record length %d above the %d byte limit", length, MaxRecordSize)
			end = r.off + recordHeaderSizeV3
		}
		return nil, 0, r.damagedV3(r.off, end, what)
	}
	buf, err := r.window(r.off, recordHeaderSizeV3+int(length))
	if err != nil {
		return nil, 0, err
	}
	payload, n, err := decodeRecordV3(buf, r.num)
	switch {
	case err == nil:
		offset = r.off
		r.off += int64(n)
		return payload, offset, nil
	case errors.Is(err, errOtherSegment):
		return nil, 0, r.endV3()
	case errors.Is(err, errRecordSegment):
		return nil, 0, base.CorruptionErrorf("wal segment %s: record at offset %d names segment %d but checks as a record of this one (damaged segment number)",
			r.path, r.off, binary.LittleEndian.Uint64(hdr[recordSegmentOffset:]))
	default:
		return nil, 0, r.damagedV3(r.off, r.off+recordHeaderSizeV3+length, fmt.Sprintf("record checksum mismatch (record length %d)", length))
	}
}

// endV3 is called where the bytes at r.off are not a record of this
// version 3 segment: the records end there unless the seal says otherwise
// or an intact record of this segment follows (then something damaged the
// record at r.off, and cutting there would silently drop the ones after).
func (r *segmentReader) endV3() error {
	if r.hdr.sealed != 0 {
		return r.end()
	}
	at, found, err := r.intactRecordV3After(r.off + 1)
	if err != nil {
		return err
	}
	if found {
		return base.CorruptionErrorf("wal segment %s: records end at offset %d but an intact record of the segment follows at offset %d",
			r.path, r.off, at)
	}
	return io.EOF
}

// corruptAt reports the damaged record of this segment at off as
// corruption; why, when not empty, starts with a space and says why it is
// not a torn tail.
func (r *segmentReader) corruptAt(off int64, what, why string) error {
	return base.CorruptionErrorf("wal segment %s: %s at offset %d%s", r.path, what, off, why)
}

// notATornTail returns the corruption error for damage at off when the
// segment rules out a torn tail whatever follows (it is not the last, or a
// clean close sealed it), else nil.
func (r *segmentReader) notATornTail(off int64, what string) error {
	if !r.last {
		return r.corruptAt(off, what, "")
	}
	if r.hdr.sealed != 0 {
		return r.corruptAt(off, what, fmt.Sprintf(" (the segment was sealed at %d by a clean close)", r.hdr.sealed))
	}
	return nil
}

// damagedV3 reports the record of this segment at off, whose extent ends
// at end, that does not decode: a torn tail when the segment is the last,
// is not sealed and no intact record of it follows, else corruption.
func (r *segmentReader) damagedV3(off, end int64, what string) error {
	corrupt := func(why string) error { return r.corruptAt(off, what, why) }
	if err := r.notATornTail(off, what); err != nil {
		return err
	}
	at, found, err := r.intactRecordV3After(off + 1)
	if err != nil {
		return err
	}
	if found {
		return corrupt(fmt.Sprintf(" (an intact record follows at offset %d)", at))
	}
	return &tornTailError{path: r.path, offset: off, size: end, why: what, zero: true}
}

// intactRecordV3After returns the offset of the first intact record of
// this segment that starts at from or after it. Candidates are the places
// where the segment number appears, so the search reads the rest of the
// file once and checksums almost nothing.
func (r *segmentReader) intactRecordV3After(from int64) (int64, bool, error) {
	var pattern [8]byte
	binary.LittleEndian.PutUint64(pattern[:], r.num)
	// A chunk starts recordSegmentOffset bytes before the first header it
	// searches and overlaps the next by len(pattern)-1 bytes, so a number
	// field is seen whole in exactly one chunk.
	chunk := make([]byte, readChunkSize)
	for start := from; start+recordHeaderSizeV3 <= r.size; {
		chunkOff := start + recordSegmentOffset
		n := min(int64(len(chunk)), r.size-chunkOff)
		if err := r.readAt(chunk[:n], chunkOff); err != nil {
			return 0, false, err
		}
		for i := 0; ; {
			j := bytes.Index(chunk[i:n], pattern[:])
			if j < 0 {
				break
			}
			hdrOff := chunkOff + int64(i+j) - recordSegmentOffset
			i += j + 1
			hdr, err := r.readRange(hdrOff, hdrOff+recordHeaderSizeV3)
			if err != nil {
				return 0, false, err
			}
			length := int64(binary.LittleEndian.Uint32(hdr[recordLengthOffset:]))
			if length > MaxRecordSize || hdrOff+recordHeaderSizeV3+length > r.size {
				continue
			}
			rec, err := r.readRange(hdrOff, hdrOff+recordHeaderSizeV3+length)
			if err != nil {
				return 0, false, err
			}
			if _, _, err := decodeRecordV3(rec, r.num); err == nil {
				return hdrOff, true, nil
			}
		}
		if chunkOff+n >= r.size {
			break
		}
		start += n - int64(len(pattern)-1)
	}
	return 0, false, nil
}

// end is called where the records of the segment end cleanly: it returns
// io.EOF, or corruption when a seal says they should end elsewhere.
func (r *segmentReader) end() error {
	if r.hdr.sealed != 0 && r.off != r.hdr.sealed {
		return base.CorruptionErrorf("wal segment %s: records end at offset %d but the segment was sealed at %d by a clean close",
			r.path, r.off, r.hdr.sealed)
	}
	return io.EOF
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// isHeaderPrefix reports whether hdr, shorter than a whole header, can be
// the start of segment num's header cut short by a crash.
func isHeaderPrefix(hdr []byte, num uint64) bool {
	v1 := appendSegmentHeaderV1(nil, num)
	if len(hdr) < len(v1) && bytes.Equal(hdr, v1[:len(hdr)]) {
		return true
	}
	// The preallocated size is unknown here; the seal is zero when the
	// header is first written.
	for _, v := range []byte{formatVersion2, formatVersion3} {
		v2 := appendSegmentHeaderVersion(nil, v, num, 0)
		n := min(len(hdr), segmentPreallocOffset)
		if len(hdr) < len(v2) && bytes.Equal(hdr[:n], v2[:n]) &&
			(len(hdr) <= segmentSealedOffset || allZero(hdr[segmentSealedOffset:])) {
			return true
		}
	}
	return false
}

func (r *segmentReader) readHeader() error {
	if r.size == 0 {
		// A crash between creating a segment and syncing its header leaves
		// an empty file, and Replay truncates a torn header to nothing; both
		// hold no records.
		return nil
	}
	hdrLen := int(min(r.size, segmentHeaderSize))
	hdr, err := r.window(0, hdrLen)
	if err != nil {
		return err
	}
	if r.last {
		if isHeaderPrefix(hdr, r.num) {
			return &tornTailError{path: r.path, offset: 0, size: r.size, why: "incomplete segment header"}
		}
		if zero, err := r.zeroFrom(0); err != nil {
			return err
		} else if zero {
			return &tornTailError{path: r.path, offset: 0, size: r.size, why: "zero-filled segment"}
		}
	}
	need := segmentHeaderSizeV1
	if hdrLen > segmentVersionOffset {
		need = max(need, headerSizeOf(hdr[segmentVersionOffset]))
	}
	if hdrLen < need {
		return base.CorruptionErrorf("wal segment %s: incomplete segment header at offset 0: file is %d bytes, want at least %d",
			r.path, r.size, need)
	}
	h, err := checkSegmentHeader(hdr[:need], r.num)
	if err != nil {
		return base.CorruptionErrorf("wal segment %s: bad segment header at offset 0: %v", r.path, err)
	}
	r.hdr = h
	r.off = h.size
	if h.version >= formatVersion2 && r.size < h.prealloc {
		// The size was synced before any record was written, so a shorter
		// file was truncated, unless it holds nothing past its header: a
		// crash before that first sync.
		zero, err := r.zeroFrom(h.size)
		if err != nil {
			return err
		}
		if zero && r.last && h.sealed == 0 {
			return &tornTailError{path: r.path, offset: r.size, size: r.size, why: "creation interrupted before the preallocated size was synced", extendTo: h.prealloc}
		}
		return base.CorruptionErrorf("wal segment %s: file is %d bytes, shorter than the %d it was preallocated to (truncated) at offset %d",
			r.path, r.size, h.prealloc, r.size)
	}
	return nil
}

// damaged turns a record that failed to decode at off into either a torn
// tail (only in the last segment, only when nothing intact can follow the
// damage) or a corruption error.
func (r *segmentReader) damaged(off int64, cause error, what string) error {
	if r.hdr.version >= formatVersion2 {
		return r.damagedV2(off, cause, what)
	}
	if r.last {
		torn, err := r.isTornTail(off, cause)
		if err != nil {
			return err
		}
		if torn {
			return &tornTailError{path: r.path, offset: off, size: r.size, why: what}
		}
	}
	return base.CorruptionErrorf("wal segment %s: %s at offset %d", r.path, what, off)
}

// damagedV2 is damaged for a version 2 segment: the damage is a torn tail
// only in the last segment, when it is not sealed, the record at off has a
// sane length, nothing but zeros follows that record's extent, and no
// intact record starts inside it. The cut is then that one record.
func (r *segmentReader) damagedV2(off int64, cause error, what string) error {
	corrupt := func(why string) error { return r.corruptAt(off, what, why) }
	if err := r.notATornTail(off, what); err != nil {
		return err
	}
	if errors.Is(cause, errRecordLength) {
		// A torn write leaves a prefix of what was written, never an
		// absurd length.
		return corrupt("")
	}
	end := r.size
	if r.size-off >= recordHeaderSize {
		hdr, err := r.window(off, recordHeaderSize)
		if err != nil {
			return err
		}
		end = min(r.size, off+recordHeaderSize+int64(binary.LittleEndian.Uint32(hdr[recordLengthOffset:])))
	}
	if zero, err := r.zeroFrom(end); err != nil {
		return err
	} else if !zero {
		return corrupt(fmt.Sprintf(" (non-zero bytes follow the damaged record's end at %d: more than one record would be cut)", end))
	}
	data, err := r.readRange(off, end)
	if err != nil {
		return err
	}
	if len(data) > recordHeaderSize && intactRecordFollows(data[recordHeaderSize:]) {
		return corrupt(" (an intact record follows)")
	}
	// Only the bytes that were written are cut (and reported); the zeros
	// after them are the preallocation.
	cut := len(data)
	for cut > 0 && data[cut-1] == 0 {
		cut--
	}
	return &tornTailError{path: r.path, offset: off, size: off + int64(cut), why: what, zero: true}
}

// isTornTail decides whether the damaged record at off can be the end of an
// interrupted write. A crash leaves a prefix of the last write, possibly
// followed by zeros where the file grew but the data never reached the disk.
// Intact records after the damage mean it is not a tail: a damaged length
// field can make a middle record look like one that runs to (or past) the
// end of the file, and truncating there would silently drop the records
// after it.
func (r *segmentReader) isTornTail(off int64, cause error) (bool, error) {
	if zero, err := r.zeroFrom(off); err != nil || zero {
		return zero, err
	}
	if r.size-off < recordHeaderSize {
		return true, nil
	}
	if errors.Is(cause, errRecordLength) {
		// No writer produces such a length, so only zeros may follow.
		return r.zeroFrom(off + recordHeaderSize)
	}
	if errors.Is(cause, errRecordChecksum) {
		hdr, err := r.window(off, recordHeaderSize)
		if err != nil {
			return false, err
		}
		end := off + recordHeaderSize + int64(binary.LittleEndian.Uint32(hdr[recordLengthOffset:]))
		if zero, err := r.zeroFrom(end); err != nil || !zero {
			return false, err
		}
	}
	// The record runs to or past the end of the file (or into zeros).
	rest, err := r.readRange(off+recordHeaderSize, r.size)
	if err != nil {
		return false, err
	}
	return !intactRecordFollows(rest), nil
}

// intactRecordFollows reports whether a record with a valid checksum starts
// anywhere in data and is followed by correctly framed records up to the end
// of data or up to an all-zero tail. Requiring the framing to reach the end
// makes random payload bytes almost never qualify, so checksums are computed
// for very few candidates; the framing check runs backwards over data once,
// so the whole search is linear.
func intactRecordFollows(data []byte) bool {
	zeroTail := len(data)
	for zeroTail > 0 && data[zeroTail-1] == 0 {
		zeroTail--
	}
	// framed[i] says framing from offset i reaches the end or the zero tail.
	framed := make([]uint64, len(data)/64+1)
	set := func(i int) { framed[i/64] |= 1 << (i % 64) }
	get := func(i int) bool { return framed[i/64]&(1<<(i%64)) != 0 }
	for i := len(data); i >= 0; i-- {
		if i >= zeroTail {
			set(i)
			continue
		}
		if len(data)-i < recordHeaderSize {
			continue
		}
		length, err := recordLength(data[i:])
		if err != nil {
			continue
		}
		if end := i + recordHeaderSize + length; end <= len(data) && get(end) {
			set(i)
		}
	}
	for i := 0; i < zeroTail; i++ {
		if !get(i) {
			continue
		}
		if _, _, err := decodeRecord(data[i:]); err == nil {
			return true
		}
	}
	return false
}

// zeroFrom reports whether every byte from off to the end of the file is
// zero.
func (r *segmentReader) zeroFrom(off int64) (bool, error) {
	var chunk []byte
	for off < r.size {
		n := min(r.size-off, readChunkSize)
		if chunk == nil {
			chunk = make([]byte, n)
		}
		if err := r.readAt(chunk[:n], off); err != nil {
			return false, err
		}
		for _, c := range chunk[:n] {
			if c != 0 {
				return false, nil
			}
		}
		off += n
	}
	return true, nil
}

// window returns file bytes [off, off+n), which must lie inside the file.
// The result aliases r.buf and is valid until the next call.
func (r *segmentReader) window(off int64, n int) ([]byte, error) {
	if off >= r.bufOff && off+int64(n) <= r.bufOff+int64(len(r.buf)) {
		start := off - r.bufOff
		return r.buf[start : start+int64(n)], nil
	}
	want := int(min(max(int64(n), readChunkSize), r.size-off))
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	r.bufOff = off
	if err := r.readAt(r.buf, off); err != nil {
		r.buf = r.buf[:0]
		return nil, err
	}
	return r.buf[:n], nil
}

func (r *segmentReader) readRange(from, to int64) ([]byte, error) {
	buf := make([]byte, to-from)
	if err := r.readAt(buf, from); err != nil {
		return nil, err
	}
	return buf, nil
}

func (r *segmentReader) readAt(p []byte, off int64) error {
	n, err := r.r.ReadAt(p, off)
	if n == len(p) {
		// io.ReaderAt may report io.EOF along with the final bytes.
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("cannot read wal segment %s at offset %d: %w", r.path, off+int64(n), err)
}
