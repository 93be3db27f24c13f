//go:build !race

package reader

// raceEnabled: the race detector makes sync.Pool drop some of what is put.
const raceEnabled = false
