package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/internal/sstable"
)

// compactionCheckInterval re-runs the picker even without flushes, because
// time alone makes SSTables fully expired and windows closed.
const compactionCheckInterval = time.Minute

func (db *DB) compactionLoop() {
	defer db.bg.Done()
	ticker := time.NewTicker(compactionCheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-db.closing:
			db.mu.Lock()
			for db.compactions > 0 {
				db.cond.Wait()
			}
			db.mu.Unlock()
			return
		case <-db.compactSignal:
		case <-ticker.C:
		}
		if db.opts.DisableAutoCompaction {
			continue
		}
		for {
			db.mu.Lock()
			if db.closed || db.bgErr != nil || db.compactions >= db.opts.CompactionConcurrency {
				db.mu.Unlock()
				break
			}
			c := db.pickCompactionLocked()
			if c == nil {
				db.mu.Unlock()
				break
			}
			c.paced = true
			db.startCompactionLocked(c)
			db.mu.Unlock()
			go db.runCompaction(c) // a failure is recorded as the background error
		}
	}
}

// maybeScheduleCompaction wakes the compaction loop, and the compactions
// waiting for the throughput limit, which look again whether pacing
// still applies (a flush may have brought a table near the write stall).
func (db *DB) maybeScheduleCompaction() {
	if db.pacer != nil {
		db.pacer.kick()
	}
	select {
	case db.compactSignal <- struct{}{}:
	default:
	}
}

func (db *DB) startCompactionLocked(c *compaction) {
	db.compactions++
	for _, h := range c.inputs {
		db.compacting[h.fileNum] = true
	}
}

// runCompaction executes a started compaction and releases its inputs. A
// failure stops writes (it may be a failing disk) and is returned.
func (db *DB) runCompaction(c *compaction) error {
	err := db.compact(c)
	db.mu.Lock()
	db.compactions--
	for _, h := range c.inputs {
		delete(db.compacting, h.fileNum)
	}
	db.broadcastLocked()
	db.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("compaction of table %q: %w", c.table.def.Name, err)
		if !isNoSpace(err) {
			db.setBackgroundError(err)
			return err
		}
		db.setTransientError(&db.compactErr, err)
		db.mu.Lock()
		wait := retryBackoff(db.compactRetries)
		db.compactRetries++
		db.mu.Unlock()
		time.AfterFunc(wait, db.maybeScheduleCompaction)
		return err
	}
	db.mu.Lock()
	db.compactRetries = 0
	db.mu.Unlock()
	db.clearTransientError(&db.compactErr)
	db.maybeScheduleCompaction()
	return nil
}

// Compact runs a full (major) compaction of one table and waits for it:
// every SSTable is rewritten, merged into one (one per time window, for
// TimeWindow tables), and fully expired SSTables are dropped. A TimeWindow
// table whose SSTables hold deletions that may be purged is first
// compacted as a whole, split by window, so that deletions meet the older
// windows' data they delete (see pickTombstoneLocked).
//
// Compact is not paced by Options.CompactionThroughput, and while it runs
// the background compactions it waits for are not paced either.
func (db *DB) Compact(table string) error {
	db.manualCompactions.Add(1)
	defer db.manualCompactions.Add(-1)
	if db.pacer != nil {
		db.pacer.kick()
	}
	if err := db.compactAcrossWindows(table); err != nil {
		return err
	}
	db.mu.Lock()
	t, err := db.lookupTableLocked(table)
	if err != nil {
		db.mu.Unlock()
		return err
	}
	// Wait for running compactions of this table so every SSTable is ours.
	for db.tableCompactingLocked(t.id) && !db.closed && db.bgErr == nil {
		db.cond.Wait()
	}
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	if db.bgErr != nil {
		db.mu.Unlock()
		return db.bgErr
	}
	var plan []*compaction
	all := db.current.sstables[t.id]
	if t.def.Compaction == TimeWindow {
		if c := db.pickExpiredLocked(t, all, db.opts.Clock.Now().Unix()); c != nil {
			plan = append(plan, c)
		}
		dropped := map[*sstHandle]bool{}
		for _, c := range plan {
			for _, h := range c.inputs {
				dropped[h] = true
			}
		}
		windows := map[int64][]*sstHandle{}
		var order []int64
		for _, h := range all {
			if dropped[h] {
				continue
			}
			w := timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)
			if _, ok := windows[w]; !ok {
				order = append(order, w)
			}
			windows[w] = append(windows[w], h)
		}
		// Every window is rewritten, even one SSTable alone, so flushed
		// files get compaction's stronger compression and purges.
		for _, w := range order {
			plan = append(plan, &compaction{table: t, inputs: windows[w], reason: "major (window)"})
		}
	} else if len(all) > 0 {
		plan = append(plan, &compaction{table: t, inputs: all, reason: "major"})
	}
	for _, c := range plan {
		db.startCompactionLocked(c)
	}
	db.mu.Unlock()
	var firstErr error
	for _, c := range plan {
		if err := db.runCompaction(c); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// compactAcrossWindows compacts every SSTable of a TimeWindow table (but
// the fully expired ones, which Compact drops whole) in one compaction
// split by window, if two windows or more hold SSTables and one of them
// holds deletions (cell, row, range or partition tombstones) a compaction
// could purge now.
func (db *DB) compactAcrossWindows(table string) error {
	db.mu.Lock()
	t, err := db.lookupTableLocked(table)
	if err != nil || t.def.Compaction != TimeWindow {
		db.mu.Unlock()
		return err
	}
	for db.tableCompactingLocked(t.id) && !db.closed && db.bgErr == nil {
		db.cond.Wait()
	}
	if db.closed || db.bgErr != nil {
		err := db.bgErr
		if db.closed {
			err = ErrClosed
		}
		db.mu.Unlock()
		return err
	}
	now := db.opts.Clock.Now().Unix()
	gcBefore := t.def.gcBefore(now)
	// Fully expired SSTables are left to Compact, which drops them whole;
	// expired cells need no other window to be purged, deletions may.
	var expired map[*sstHandle]bool
	if c := db.pickExpiredLocked(t, db.current.sstables[t.id], now); c != nil {
		expired = map[*sstHandle]bool{}
		for _, h := range c.inputs {
			expired[h] = true
		}
	}
	var inputs []*sstHandle
	windows := map[int64]bool{}
	droppable := false
	for _, h := range db.current.sstables[t.id] {
		if expired[h] {
			continue
		}
		inputs = append(inputs, h)
		windows[timeWindow(h.props.MaxTimestamp, t.def.WindowSeconds)] = true
		droppable = droppable || h.props.Tombstones.Deletions.CountBefore(gcBefore) > 0
	}
	if len(windows) < 2 || !droppable {
		db.mu.Unlock()
		return nil
	}
	c := &compaction{table: t, inputs: inputs, splitByWindow: true, reason: "major (deletions across windows)"}
	db.startCompactionLocked(c)
	db.mu.Unlock()
	return db.runCompaction(c)
}

func (db *DB) tableCompactingLocked(tableID uint32) bool {
	for _, h := range db.current.sstables[tableID] {
		if db.compacting[h.fileNum] {
			return true
		}
	}
	return false
}

// CompactAll runs Compact on every table.
func (db *DB) CompactAll() error {
	db.mu.Lock()
	names := make([]string, 0, len(db.tables))
	for name := range db.tables {
		names = append(names, name)
	}
	db.mu.Unlock()
	for _, name := range names {
		if err := db.Compact(name); err != nil {
			return err
		}
	}
	return nil
}

// compact executes c and installs its result.
func (db *DB) compact(c *compaction) error {
	start := time.Now()
	var inBytes int64
	for _, h := range c.inputs {
		inBytes += h.size
	}
	var outs []*sstHandle
	var stats compactionStats
	merge := func() error {
		switch {
		case c.dropOnly:
		case c.splitByWindow:
			var err error
			if outs, stats, err = db.compactByWindow(c); err != nil {
				return err
			}
		default:
			life := longLived
			if c.intermediate {
				life = shortLived
			}
			out, err := db.writeSSTable(c.table, life, c.pace(db), func(w *sstable.Writer) error {
				var err error
				stats, err = db.mergeInputs(c, w)
				return err
			})
			if err != nil {
				return err
			}
			outs = []*sstHandle{out}
		}
		return nil
	}
	var err error
	if c.paced && !c.dropOnly {
		// A background compaction: merged at a lower CPU priority.
		err = db.runAtCompactionPriority(merge)
	} else {
		err = merge()
	}
	if err != nil {
		return err
	}
	kept := outs[:0]
	for _, out := range outs {
		if out.props.Partitions == 0 {
			// Everything was purged: keep no empty file.
			out.discard()
			continue
		}
		kept = append(kept, out)
	}
	outs = kept
	if c.reason == tombstoneReason && stats.purged == 0 && stats.shadowed == 0 {
		// Set before the outputs are installed (under db.mu), so the
		// picker never sees them without it.
		retry := db.opts.Clock.Now().Unix() + max(c.table.def.tombstoneCompactionIntervalSeconds(), futileTombstoneRetrySeconds)
		for _, out := range outs {
			out.tombstoneRetryAt = retry
		}
	}
	removed := map[uint64]bool{}
	for _, h := range c.inputs {
		removed[h.fileNum] = true
	}
	err = db.editManifest(func(m *manifestData, ssts map[uint32][]*sstHandle) {
		kept := m.SSTables[:0]
		for _, s := range m.SSTables {
			if !removed[s.FileNum] {
				kept = append(kept, s)
			}
		}
		m.SSTables = kept
		list := ssts[c.table.id][:0]
		for _, h := range ssts[c.table.id] {
			if !removed[h.fileNum] {
				list = append(list, h)
			}
		}
		for _, out := range outs {
			m.SSTables = append(m.SSTables, manifestSSTable{FileNum: out.fileNum, TableID: out.tableID, Size: out.size})
			list = append(list, out)
		}
		ssts[c.table.id] = list
	}, func(v *version) *version {
		// The manifest no longer lists the inputs: mark them before the
		// new version drops the old one's references, so the last
		// reference to go removes the file.
		for _, h := range c.inputs {
			h.obsolete.Store(true)
		}
		return v
	})
	if err != nil {
		if !errors.Is(err, errManifestUnsynced) {
			for _, out := range outs {
				out.discard()
			}
		}
		return err
	}
	var outBytes int64
	for _, out := range outs {
		outBytes += out.size
	}
	db.metrics.compacted(c, inBytes, outBytes, stats, time.Since(start))
	db.log.Info("compacted", "table", c.table.def.Name, "reason", c.reason, "inputs", len(c.inputs), "outputs", len(outs),
		"in_bytes", inBytes, "out_bytes", outBytes, "purged_tombstones", stats.purged, "dropped_shadowed", stats.shadowed,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

type compactionStats struct {
	partitions int64
	cells      int64
	purged     int64 // tombstones and expired cells dropped after gc_grace
	shadowed   int64 // cells dropped because a deletion covers them
}

// partitionSink receives a compaction's output: *sstable.Writer, or
// windowSink, which splits it by time window.
type partitionSink interface {
	StartPartition(key []byte, del base.PartitionDeletions) error
	Add(c *base.Cell) error
}

// compactByWindow runs c writing one SSTable per time window of its
// inputs (see windowSink), so a tombstone compaction that pulls older
// windows' SSTables in keeps their data in their windows.
func (db *DB) compactByWindow(c *compaction) ([]*sstHandle, compactionStats, error) {
	ws := &windowSink{db: db, t: c.table, pace: c.pace(db), outputs: map[int64]*windowOutput{}}
	for _, h := range c.inputs {
		w := timeWindow(h.props.MaxTimestamp, c.table.def.WindowSeconds)
		if _, ok := ws.outputs[w]; !ok {
			ws.outputs[w] = &windowOutput{}
			ws.windows = append(ws.windows, w)
		}
	}
	sort.Slice(ws.windows, func(i, j int) bool { return ws.windows[i] < ws.windows[j] })
	ws.life = longLived
	if len(ws.windows) > maxZstdSplitWindows {
		ws.life = shortLived
	}
	stats, err := db.mergeInputs(c, ws)
	var outs []*sstHandle
	for _, w := range ws.windows {
		o := ws.outputs[w]
		if o.p == nil {
			continue
		}
		if err != nil {
			o.p.abort(db)
			continue
		}
		h, ferr := o.p.finish(db)
		if ferr != nil {
			err = ferr
			continue
		}
		outs = append(outs, h)
	}
	if err != nil {
		for _, h := range outs {
			h.discard()
		}
		return nil, stats, err
	}
	return outs, stats, nil
}

// maxZstdSplitWindows is the most windows a compaction split by window
// writes long-lived (see windowSink).
const maxZstdSplitWindows = 4

// windowSink writes each cell to the output of its time window, and each
// deletion to the output of its timestamp's window: the output of the
// first input window at or after it, so that an output never holds
// anything newer than its window and the picker files it where its data
// came from. (An input's cells are at or before its window, which is the
// window of its newest write; a window with no input gets no output.)
//
// Every output is open at once. A zstd writer holds an encoder of a few
// MiB at the long-lived level, so past maxZstdSplitWindows windows the
// outputs are written short-lived (S2, whose encoder holds nothing), each
// window then costing its write buffer and open block, about 0.3 MiB.
type windowSink struct {
	db      *DB
	t       *tableState
	life    sstableLife
	pace    func(n int)
	windows []int64 // input windows, ascending
	outputs map[int64]*windowOutput
	pk      []byte
}

type windowOutput struct {
	p       *pendingSSTable
	started bool // holds the current partition
}

func (ws *windowSink) output(timestampMicros int64) (*windowOutput, error) {
	w := timeWindow(timestampMicros, ws.t.def.WindowSeconds)
	i := sort.Search(len(ws.windows), func(i int) bool { return ws.windows[i] >= w })
	if i == len(ws.windows) {
		i-- // cannot happen: every input's writes are at or before its window
	}
	o := ws.outputs[ws.windows[i]]
	if o.p == nil {
		p, err := ws.db.createSSTable(ws.t, ws.life, ws.pace)
		if err != nil {
			return nil, err
		}
		o.p = p
	}
	return o, nil
}

func (ws *windowSink) StartPartition(key []byte, del base.PartitionDeletions) error {
	ws.pk = key
	for _, o := range ws.outputs {
		o.started = false
	}
	per, err := splitDeletionsByWindow(del, ws.output)
	if err != nil {
		return err
	}
	for o, d := range per {
		if err := o.p.w.StartPartition(key, *d); err != nil {
			return err
		}
		o.started = true
	}
	return nil
}

func (ws *windowSink) Add(c *base.Cell) error {
	o, err := ws.output(c.Timestamp)
	if err != nil {
		return err
	}
	if !o.started {
		if err := o.p.w.StartPartition(ws.pk, base.PartitionDeletions{Partition: base.LiveDeletion}); err != nil {
			return err
		}
		o.started = true
	}
	return o.p.w.Add(c)
}

// closeScanners releases the blocks of the scanners opened so far. A
// merged cell aliases the blocks of its sources (a Scanner holds the one
// it reads and the one before, enough for a merge that keeps one cell while
// it steps), so the scanners are closed only once the merge is done.
func closeScanners(scanners []*sstable.Scanner) {
	for _, s := range scanners {
		if s != nil {
			s.Close()
		}
	}
}

// scannerSource adapts one input's current partition to a cellSource.
// allLive says that every cell of the input is live at the compaction's
// now (it holds no cell tombstone, and no expiry at or before now), so a
// block copy need not look at its cells for purges (copyBlock).
type scannerSource struct {
	s       *sstable.Scanner
	allLive bool
}

func (ss scannerSource) Next() bool       { return ss.s.NextCell() }
func (ss scannerSource) Cell() *base.Cell { return ss.s.Cell() }
func (ss scannerSource) Err() error       { return ss.s.Err() }

// mergeInputs writes the merge of c's inputs to w, partition by partition,
// applying Cassandra's rules: versions reconcile, deletions drop what they
// shadow, and tombstones (with expired cells) are purged once past
// gc_grace if nothing outside the compaction may hold older data for the
// partition.
func (db *DB) mergeInputs(c *compaction, w partitionSink) (compactionStats, error) {
	var st compactionStats
	scanners := make([]*sstable.Scanner, len(c.inputs))
	live := make([]bool, len(c.inputs))
	defer closeScanners(scanners)
	for i, h := range c.inputs {
		scanners[i] = h.reader.NewScanner()
		live[i] = scanners[i].NextPartition()
		if err := scanners[i].Err(); err != nil {
			return st, err
		}
	}
	inputs := map[*sstHandle]bool{}
	for _, h := range c.inputs {
		inputs[h] = true
	}
	now := db.opts.Clock.Now().Unix()
	gcBefore := c.table.def.gcBefore(now)
	allLive := make([]bool, len(c.inputs))
	for i, h := range c.inputs {
		allLive[i] = h.props.TombstoneCells == 0 && h.props.MinLocalDeletionTime > now
	}
	var sources []cellSource
	var members []int
	copier, _ := w.(blockCopier)
	if c.noBlockCopy || (copier != nil && !copier.CopiesBlocks()) {
		copier = nil
	}
	for {
		// The smallest partition key among the inputs.
		var pk []byte
		for i, s := range scanners {
			if live[i] && (pk == nil || bytes.Compare(s.Partition().Key, pk) < 0) {
				pk = s.Partition().Key
			}
		}
		if pk == nil {
			return st, nil
		}
		pk = bytes.Clone(pk)
		del := base.PartitionDeletions{Partition: base.LiveDeletion}
		sources, members = sources[:0], members[:0]
		for i, s := range scanners {
			if live[i] && bytes.Equal(s.Partition().Key, pk) {
				info := s.Partition()
				del.Partition = del.Partition.Max(info.Deletions.Partition)
				del.Ranges = append(del.Ranges, info.Deletions.Ranges...)
				sources = append(sources, scannerSource{s: s, allLive: allLive[i]})
				members = append(members, i)
			}
		}
		// purgeBelow is computed once per partition, only if needed: a
		// tombstone may go only if it is older than everything outside
		// the compaction that may hold this partition.
		purgeBelow := int64(math.MinInt64)
		purgeKnown := false
		purgeable := func(ts, purgeTime int64) bool {
			if purgeTime >= gcBefore {
				return false
			}
			if !purgeKnown {
				purgeBelow = db.maxPurgeableTimestamp(c.table.id, pk, inputs)
				purgeKnown = true
			}
			return ts < purgeBelow
		}
		// Fragments of every input's ranges: sorted and disjoint, each
		// with the strongest deletion covering it, so the cells below
		// are checked with one cursor instead of against every range.
		if len(members) > 1 {
			del.Ranges = base.FragmentRanges(del.Ranges)
		}
		// Shadowing uses every deletion, purgeable or not: a purged
		// deletion must take the data it shadows with it.
		shadowing := base.NewRangeCursor(del.Ranges, false)
		kept := base.PartitionDeletions{Partition: del.Partition}
		if !del.Partition.IsLive() && purgeable(del.Partition.MarkedForDeleteAt, del.Partition.LocalDeletionTime) {
			kept.Partition = base.LiveDeletion
			st.purged++
		}
		for _, rt := range del.Ranges {
			switch {
			case del.Partition.Deletes(rt.Deletion.MarkedForDeleteAt):
				st.shadowed++
			case purgeable(rt.Deletion.MarkedForDeleteAt, rt.Deletion.LocalDeletionTime):
				st.purged++
			default:
				kept.Ranges = append(kept.Ranges, rt.Clone())
			}
		}

		// The surviving cells go to the writer as the merge yields them
		// (it copies what it keeps), so a compaction holds no partition
		// in memory however large: the partition is started at its first
		// surviving cell, or at the end for deletions alone.
		started := false
		var added int64
		merge := newMergingIter(sources, nil, false)
		// Blocks are copied only where nothing can be shadowed: a
		// partition without deletions (cells shadow only their own key,
		// which a copied block holds alone).
		copyBlocks := copier != nil && del.IsEmpty()
		start := func() error {
			if started {
				return nil
			}
			started = true
			return w.StartPartition(pk, kept)
		}
		for {
			if copyBlocks {
				n, err := copyBlock(merge, copier, now, start)
				if err != nil {
					return st, err
				}
				if n > 0 {
					added += n
					continue
				}
			}
			if !merge.Next() {
				break
			}
			cell := merge.Cell()
			if del.Partition.Max(shadowing.Deletion(cell.Clustering)).Deletes(cell.Timestamp) {
				st.shadowed++
				continue
			}
			if !cell.IsLive(now) && purgeable(cell.Timestamp, cell.PurgeTime()) {
				st.purged++
				continue
			}
			if !started {
				if err := w.StartPartition(pk, kept); err != nil {
					return st, err
				}
				started = true
			}
			if err := w.Add(cell); err != nil {
				return st, err
			}
			added++
		}
		if err := merge.Err(); err != nil {
			return st, err
		}
		if !started && !kept.IsEmpty() {
			if err := w.StartPartition(pk, kept); err != nil {
				return st, err
			}
			started = true
		}
		if started {
			st.partitions++
			st.cells += added
		}
		for _, i := range members {
			live[i] = scanners[i].NextPartition()
			if err := scanners[i].Err(); err != nil {
				return st, err
			}
		}
	}
}

// blockCopier is a compaction output that can take an input's data block
// whole (*sstable.Writer).
type blockCopier interface {
	CopiesBlocks() bool
	CopyBlock(s *sstable.Scanner) (bool, error)
}

// copyBlock copies the next data block of the merge's top source to out,
// if the merge (forward, as a compaction's is) would pass it through
// unchanged: the source is at the
// block's first cell, the whole block sorts before every other source's
// next cell (so none of its cells meets another version, or a cell
// tombstone, of its key), and every cell is live at now (the input's
// properties say so, or its cells are looked at; so none is
// purged; the caller has checked that the partition has no deletions
// that could shadow one). start starts the output partition first. It
// returns how many cells it copied: 0 when the caller must merge the next
// cell itself (the writer may also decline a block, see
// sstable.Writer.CopyBlock).
func copyBlock(merge *mergingIter, out blockCopier, now int64, start func() error) (int64, error) {
	ss, ok := merge.top().(scannerSource)
	if !ok {
		return 0, nil
	}
	meta, ok := ss.s.BlockStart()
	if !ok {
		return 0, nil
	}
	if next := merge.otherNext(); next != nil && bytes.Compare(meta.MaxClustering, next.Clustering) >= 0 {
		return 0, nil
	}
	if !ss.allLive && !ss.s.BlockCells(func(c *base.Cell) bool { return c.IsLive(now) }) {
		return 0, nil
	}
	if err := start(); err != nil {
		return 0, err
	}
	copied, err := out.CopyBlock(ss.s)
	if err != nil || !copied {
		return 0, err
	}
	merge.skipTop()
	if err := merge.Err(); err != nil {
		return 0, err
	}
	return int64(meta.Cells), nil
}

// maxPurgeableTimestamp returns the smallest write timestamp that any
// SSTable outside the compaction (that may hold the partition) or any
// memtable holds: only tombstones older than it may be purged. It looks
// at the current version, so data flushed while the compaction runs is
// taken into account.
func (db *DB) maxPurgeableTimestamp(tableID uint32, pk []byte, inputs map[*sstHandle]bool) int64 {
	v := db.acquireVersion()
	defer v.unref()
	bound := int64(math.MaxInt64)
	for _, mem := range v.memtables() {
		if mem.HasPartition(tableID, pk) {
			bound = min(bound, mem.MinTimestampOf(tableID))
		}
	}
	for _, h := range v.sstables[tableID] {
		if inputs[h] || h.props.MinTimestamp >= bound || !h.reader.MayContain(pk) {
			continue
		}
		bound = h.props.MinTimestamp
	}
	return bound
}

// splitDeletionsByWindow splits a partition's deletions by the output
// of their timestamps' windows (output maps a write time to it): each
// output gets the partition deletion and the range tombstones whose
// times fall in its window, to be written before any of its cells.
func splitDeletionsByWindow[O comparable](del base.PartitionDeletions, output func(ts int64) (O, error)) (map[O]*base.PartitionDeletions, error) {
	per := map[O]*base.PartitionDeletions{}
	get := func(ts int64) (*base.PartitionDeletions, error) {
		o, err := output(ts)
		if err != nil {
			return nil, err
		}
		d := per[o]
		if d == nil {
			d = &base.PartitionDeletions{Partition: base.LiveDeletion}
			per[o] = d
		}
		return d, nil
	}
	if !del.Partition.IsLive() {
		d, err := get(del.Partition.MarkedForDeleteAt)
		if err != nil {
			return nil, err
		}
		d.Partition = del.Partition
	}
	for _, rt := range del.Ranges {
		d, err := get(rt.Deletion.MarkedForDeleteAt)
		if err != nil {
			return nil, err
		}
		d.Ranges = append(d.Ranges, rt)
	}
	return per, nil
}
