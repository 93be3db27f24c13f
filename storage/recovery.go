package storage

// RecoveryInfo says what Open replayed and repaired in the WAL.
//
// The only repair Open makes is cutting the torn tail of the newest WAL
// segment after a crash: at most one record, not intact, followed only by
// zeros, in a segment that was not closed cleanly (a cleanly closed segment
// is sealed, and damage there fails Open with ErrCorruption, as does any
// truncation or damage elsewhere). That record was the end of the last group
// commit before the crash: usually a write that never completed, and so was
// never acknowledged, but a flipped byte in an acknowledged final record
// looks exactly the same. A caller that knows what it acknowledged (the
// writer's checkpoint against its source's ack floor) should compare when
// CutBytes > 0.
type RecoveryInfo struct {
	// WALRecords is the number of WAL records replayed into the memtable.
	WALRecords int
	// CutSegment is the WAL segment whose tail was cut, CutOffset where
	// the cut began and CutBytes how many written bytes were cut; all are
	// 0 when nothing was cut. CutReason says what the bytes looked like.
	CutSegment uint64
	CutOffset  int64
	CutBytes   int64
	CutReason  string
}

// Recovery returns what Open replayed and repaired in the WAL.
func (db *DB) Recovery() RecoveryInfo { return db.recovery }
