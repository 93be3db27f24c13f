package httpapi

// validJSON reports whether b is one JSON value, as json.Valid does (the
// same grammar, the same nesting limit, bytes of 0x80 and above accepted
// in strings unchecked), several times faster: json.Valid's byte-at-a-time
// state machine was the largest cost of encoding an events page (a third
// of the all-in-one's /v1/events handler at 20,000 events/s).
// FuzzValidJSON holds it to json.Valid.
func validJSON(b []byte) bool {
	valid, _ := scanJSON(b)
	return valid
}

// scanJSON is validJSON, and says too whether b has whitespace outside
// its strings (where json.Compact drops it).
func scanJSON(b []byte) (valid, spaced bool) {
	var stackSpace [64]byte
	stack := stackSpace[:0] // the open containers, '{' or '['
	i := skipSpace(b, 0, &spaced)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false, spaced
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) == maxJSONDepth {
				return false, spaced
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1, &spaced)
			if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(b, i, &spaced); i < 0 {
					return false, spaced
				}
			}
			continue
		case '"':
			if i = stringEnd(b, i); i < 0 {
				return false, spaced
			}
		case 't':
			if i = literalEnd(b, i, "true"); i < 0 {
				return false, spaced
			}
		case 'f':
			if i = literalEnd(b, i, "false"); i < 0 {
				return false, spaced
			}
		case 'n':
			if i = literalEnd(b, i, "null"); i < 0 {
				return false, spaced
			}
		default:
			if i = numberEnd(b, i); i < 0 {
				return false, spaced
			}
		}
		// After a value: close containers, or a comma and the next value.
		for {
			i = skipSpace(b, i, &spaced)
			if len(stack) == 0 {
				return i == len(b), spaced
			}
			if i >= len(b) {
				return false, spaced
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return false, spaced
			}
			i = skipSpace(b, i+1, &spaced)
			if top == '{' {
				if i = objectKey(b, i, &spaced); i < 0 {
					return false, spaced
				}
			}
			break
		}
	}
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// skipSpace returns the index of the first byte at or after i that is
// not whitespace, setting *spaced when there is any.
func skipSpace(b []byte, i int, spaced *bool) int {
	j := i
	for j < len(b) && (b[j] == ' ' || b[j] == '\n' || b[j] == '\r' || b[j] == '\t') {
		j++
	}
	if j != i {
		*spaced = true
	}
	return j
}

// objectKey checks a member's key and colon at i; it returns where the
// member's value starts, or -1.
func objectKey(b []byte, i int, spaced *bool) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = stringEnd(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i, spaced)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1, spaced)
}

// stringEnd returns the index after the string starting at b[i] == '"',
// or -1.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the index after the number starting at b[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
