//go:build race

package sstable

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
