// Package wal owns the write-ahead log of the storage engine: segment files
// of checksummed, length-prefixed records, written with group commit and
// read back by Replay after a restart. A record is one atomic batch; its
// bytes are opaque here. The byte format is documented in record.go, the
// file names in filenames.go.
//
// Invariants:
//   - Records are never split: a record is in exactly one segment, whole, and
//     Replay returns records in the order their Appends were serialised.
//   - Segment numbers are contiguous: a Writer only ever creates the segment
//     after its current one, and Replay reports a hole as corruption.
//   - In SyncAlways mode, Append returns nil only after the record is
//     synced (fdatasync where available: the preallocated size is already
//     durable). Many concurrent Appends share one write and one sync.
//   - AppendNoSync returns once its record is written, without an fsync;
//     it is durable once any later-appended record is synced (records
//     are written in append order and one fsync covers everything
//     written before it), or at the latest SyncInterval after its write,
//     when the flusher fsyncs what is left unsynced. A crash loses an
//     unsynced suffix of the log, never a record before a durable one.
//   - AppendStaged is Append in two steps: it returns once the record is
//     written (write errors as AppendNoSync's), and its result waits for
//     the fsync Append would have waited for, so the caller can work
//     between the write and the fsync. In SyncAlways mode, when its record
//     is the only one pending and no fsync runs (a single writer), it
//     writes on the caller's goroutine, so that the caller's work does not
//     wait for the Go scheduler to take a processor back from the
//     flusher's fsync; concurrent writers keep the flusher's group commit.
//   - Every segment except the newest was fsynced before its successor was
//     created, so only the newest may end in a torn write. A new segment is
//     preallocated (its size fsynced before its first record) and sealed
//     once its successor exists and by a clean Close, so Replay cuts at most
//     one damaged record from an unsealed newest segment, and reports the
//     cut in ReplayResult; any truncation, and any other damage, is an error
//     wrapping base.ErrCorruption that names the file and offset, never
//     silently skipped. Version 1 segments (no preallocation) replay under
//     the old rules, which truncate a torn-looking tail.
//   - A segment may be a reused file (Options.RecycleSegments: segments
//     released by ReleaseSegmentsBefore are kept and reused by later
//     rotations, so group commits fdatasync into blocks already allocated
//     and written). Its older records stay after the new ones; a version 3
//     record carries its segment number and a checksum keyed by it, so
//     Replay never returns a record of an older generation. A reused file
//     is given its new header, synced, before it is renamed to its new
//     number, so a file never holds another number's header under its name.
//     Close and DeleteRecycledSegments delete the kept segments.
//   - A failed write (a full disk) fails its group's Appends and is undone:
//     the partly written bytes are overwritten with the preallocated zeros
//     and the file offset moved back, so later Appends retry in place and a
//     partial batch never ends up in the middle of the log. A segment that
//     cannot be created is removed again, and Rotate may be retried. After a
//     failed fsync, or a write that cannot be undone, the Writer is failed
//     for good (Err): a retried fsync can falsely succeed.
//
// Use: at startup call Replay from the first segment not yet flushed, then
// Open a Writer at ReplayResult.LastSegment+1 (or the first segment when
// there was none). Append from any goroutine; Rotate when the memtable is
// frozen, so its records end in the segments before the returned number;
// after flushing, ReleaseSegmentsBefore that number (or
// DeleteSegmentsBefore, which keeps none).
package wal
