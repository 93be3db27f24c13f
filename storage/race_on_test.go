//go:build race

package storage

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
