package sstable

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZstdEncoderMemory checks that a zstd encoder, which the writers pool
// and keep, costs a few hundred KiB rather than the 16 MiB of history
// zstd's default 8 MiB window asks for: with two of them alive while
// flushes and compactions ran, that history was the largest item of the
// engine's heap.
func TestZstdEncoderMemory(t *testing.T) {
	for zstdEncoders[zstd.SpeedDefault].Get() != nil {
	}
	var raw bytes.Buffer
	for i := 0; raw.Len() < defaultBlockSize; i++ {
		fmt.Fprintf(&raw, `{"user":%d,"kind":"click","page":"/items/%d"}`, i%97, i%1013)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := newCompressor(CompressionZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A block with splits is written as a stream, which keeps history.
	frame, n := c.appendBlockFrame(nil, raw.Bytes(), CompressionZstd, []int{raw.Len() / 3, raw.Len() / 2}, false)
	runtime.ReadMemStats(&after)
	c.close()
	if used := Compression(frame[n]); used != CompressionZstd {
		t.Fatalf("block stored with %v, want zstd", used)
	}
	const limit = 4 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Fatalf("a new zstd encoder and one %d-byte block allocated %d bytes, want <= %d", raw.Len(), got, limit)
	}
}
