package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// sseMessage is one Server-Sent Events message, as the WHATWG HTML
// standard's "interpreting an event stream" dispatches it.
type sseMessage struct {
	// Event is the event field; empty for a plain message.
	Event string
	// Data is the data fields joined by newlines.
	Data string
	// ID is the stream's last event id when the message was dispatched
	// (an id field sets it for this message and those after).
	ID string
}

// maxSSELine bounds one line of the stream: an event of the API is at
// most its largest body (64 KiB by default) as JSON.
const maxSSELine = 4 << 20

// readSSE reads the event stream r, calling fn with each message, until
// r ends (an unfinished message at the end is dropped, as the standard
// says), fn returns an error, or a line is longer than maxSSELine.
// Lines end in CRLF, LF or CR; comments (lines starting with ':') and
// retry fields are ignored; an id holding NUL is ignored.
func readSSE(r io.Reader, fn func(sseMessage) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	sc.Split(scanSSELines)
	var event, lastID string
	var data strings.Builder
	hasData := false
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
			first = false
		}
		if len(line) == 0 {
			if hasData {
				msg := sseMessage{Event: event, Data: strings.TrimSuffix(data.String(), "\n"), ID: lastID}
				if err := fn(msg); err != nil {
					return err
				}
			}
			event, hasData = "", false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				lastID = string(value)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot read the event stream: %w", err)
	}
	return nil
}

// scanSSELines splits at CRLF, LF or CR.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a CR at the end: wait to see whether LF follows
}

// appendSSE encodes m as the stream would carry it (the inverse of
// readSSE for messages it returns).
func appendSSE(dst []byte, m sseMessage) []byte {
	if m.Event != "" {
		dst = append(append(append(dst, "event: "...), m.Event...), '\n')
	}
	dst = append(append(append(dst, "id: "...), m.ID...), '\n')
	for line := range strings.SplitSeq(m.Data, "\n") {
		dst = append(append(append(dst, "data: "...), line...), '\n')
	}
	return append(dst, '\n')
}
