package jspub

import (
	"errors"
	"testing"
)

func TestParseAck(t *testing.T) {
	tests := []struct {
		name    string
		reply   string
		seq     uint64
		apiErr  *AckError // for a JetStream error
		invalid bool
	}{
		{"ack", `{"stream":"EVENTS","seq":123}`, 123, nil, false},
		{"ack with domain and duplicate", `{"stream":"EVENTS", "domain":"hub", "seq":18446744073709551615,"duplicate":true}`, 1<<64 - 1, nil, false},
		{"ack with seq 0", `{"stream":"S","seq":0}`, 0, nil, false},
		{"ack with nested members", ` {"x":{"a":[1,-2.5e3,true,null,"s\"\u00e9"]},"stream":"S","seq":7} `, 7, nil, false},
		{"ack with error null", `{"error":null,"stream":"S","seq":9}`, 9, nil, false},
		{"upper-case keys (encoding/json matches them)", `{"Stream":"S","SEQ":4}`, 4, nil, false},
		{"escaped stream name", `{"stream":"\u0053","seq":5}`, 5, nil, false},
		{"error", `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`, 0,
			&AckError{Code: 503, ErrCode: 10077, Description: "maximum messages exceeded"}, false},
		{"error with stream and seq", `{"stream":"S","seq":3,"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"}}`, 0,
			&AckError{Code: 400, ErrCode: 10071, Description: "wrong last sequence: 2"}, false},
		{"error first, then stream", `{"error":{"code":500},"stream":"S","seq":1}`, 0, &AckError{Code: 500}, false},
		{"upper-case error key", `{"stream":"S","seq":1,"Error":{"code":500}}`, 0, &AckError{Code: 500}, false},
		{"empty error object", `{"error":{},"stream":"S","seq":1}`, 0, &AckError{}, false},
		{"no stream", `{"seq":1}`, 0, nil, true},
		{"empty stream", `{"stream":"","seq":1}`, 0, nil, true},
		{"empty object", `{}`, 0, nil, true},
		{"empty", ``, 0, nil, true},
		{"not an object", `[1]`, 0, nil, true},
		{"truncated", `{"stream":"S","seq":1`, 0, nil, true},
		{"trailing garbage", `{"stream":"S","seq":1}x`, 0, nil, true},
		{"negative seq", `{"stream":"S","seq":-1}`, 0, nil, true},
		{"fractional seq", `{"stream":"S","seq":1.5}`, 0, nil, true},
		{"seq overflows", `{"stream":"S","seq":18446744073709551616}`, 0, nil, true},
		{"seq as string", `{"stream":"S","seq":"1"}`, 0, nil, true},
		{"bad literal elsewhere", `{"stream":"S","seq":1,"x":tru}`, 0, nil, true},
		{"error not an object", `{"error":"boom","stream":"S"}`, 0, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seq, err := ParseAck([]byte(tc.reply))
			var apiErr *AckError
			switch {
			case tc.apiErr != nil:
				if !errors.As(err, &apiErr) || *apiErr != *tc.apiErr {
					t.Fatalf("ParseAck(%s) = %d, %v; want AckError %+v", tc.reply, seq, err, *tc.apiErr)
				}
			case tc.invalid:
				if !errors.Is(err, ErrInvalidAck) {
					t.Fatalf("ParseAck(%s) = %d, %v; want ErrInvalidAck", tc.reply, seq, err)
				}
			default:
				if err != nil || seq != tc.seq {
					t.Fatalf("ParseAck(%s) = %d, %v; want ack %d", tc.reply, seq, err, tc.seq)
				}
			}
		})
	}
}

// The common ack is read without allocating.
func TestParseAckFastPathAllocates(t *testing.T) {
	b := []byte(`{"stream":"EVENTS","seq":1234567,"domain":"hub"}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseAck(b) }); n != 0 {
		t.Fatalf("ParseAck of an ack allocates %v times, want 0", n)
	}
}

// FuzzParseAck checks ParseAck against encoding/json: the same outcome
// (ack with the same sequence, the same AckError, or invalid) for any
// input, so the fast path never takes an error or garbage for an ack.
func FuzzParseAck(f *testing.F) {
	for _, s := range []string{
		`{"stream":"EVENTS","seq":123}`,
		`{"stream":"S","seq":1,"duplicate":true,"domain":"d"}`,
		`{"error":{"code":503,"err_code":10077,"description":"x"}}`,
		`{"stream":"S","seq":3,"error":{"code":400}}`,
		`{"error":null,"stream":"S","seq":9}`,
		`{"Stream":"S","sEq":4}`,
		`{"x":[{"y":"\u00e9"},1e5,-0.5],"stream":"\u0053","seq":0}`,
		`{"stream":"S","seq":01}`,
		`{"stream":"S","stream":"","seq":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, err := ParseAck(b)
		wantSeq, wantErr := parseAckJSON(b)
		var got, want *AckError
		switch {
		case errors.As(wantErr, &want):
			if !errors.As(err, &got) || *got != *want {
				t.Fatalf("ParseAck(%q) = %d, %v; encoding/json says %v", b, seq, err, wantErr)
			}
		case wantErr != nil:
			if !errors.Is(err, ErrInvalidAck) {
				t.Fatalf("ParseAck(%q) = %d, %v; encoding/json says %v", b, seq, err, wantErr)
			}
		default:
			if err != nil || seq != wantSeq {
				t.Fatalf("ParseAck(%q) = %d, %v; encoding/json says ack %d", b, seq, err, wantSeq)
			}
		}
	})
}
