package main

import (
	"fmt"
	"time"

	"github.com/eventide/eventide/bucket"
	"github.com/google/uuid"
)

func newTimeUUID(t time.Time, node [8]byte) [16]byte {
	u, err := bucket.NewTimeUUID(t, node)
	if err != nil {
		panic(fmt.Sprintf("BUG: generated time %s has no TimeUUID: %v", t, err))
	}
	return u
}

// encodeTimeUUID is Eventide's order-preserving TimeUUID encoding (the
// bytes sort as Cassandra's TimeUUIDType); both engines use it.
func encodeTimeUUID(id [16]byte) []byte {
	return bucket.EncodeTimeUUID(make([]byte, 0, 16), uuid.UUID(id))
}
