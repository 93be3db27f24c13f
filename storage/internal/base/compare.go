package base

import "bytes"

// CompareCellKeys orders cells of one partition by (clustering, column).
func CompareCellKeys(aCK, aCol, bCK, bCol []byte) int {
	if c := bytes.Compare(aCK, bCK); c != 0 {
		return c
	}
	return bytes.Compare(aCol, bCol)
}
