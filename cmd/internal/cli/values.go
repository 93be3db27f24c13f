package cli

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Int is a flag.Value holding a whole number in Lo..Hi in *N.
type Int struct {
	N      *int
	Lo, Hi int
}

func (v Int) String() string {
	if v.N == nil {
		return "0"
	}
	return strconv.Itoa(*v.N)
}

func (v Int) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	if n < v.Lo || n > v.Hi {
		return fmt.Errorf("%d is outside %d..%d", n, v.Lo, v.Hi)
	}
	*v.N = n
	return nil
}

// Duration is a flag.Value holding a Go duration of at least Min in *D.
type Duration struct {
	D   *time.Duration
	Min time.Duration
}

func (v Duration) String() string {
	if v.D == nil {
		return "0s"
	}
	return v.D.String()
}

func (v Duration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration such as 100ms, 5m or 24h")
	}
	if d < v.Min {
		return fmt.Errorf("%s is below the minimum %s", d, v.Min)
	}
	*v.D = d
	return nil
}

// Addr is a flag.Value holding a host:port in *Addr; empty only when
// Optional.
type Addr struct {
	Addr     *string
	Optional bool
}

func (v Addr) String() string {
	if v.Addr == nil {
		return ""
	}
	return *v.Addr
}

func (v Addr) Set(s string) error {
	if s == "" && v.Optional {
		*v.Addr = ""
		return nil
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("not host:port such as 127.0.0.1:8080 (%v)", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	*v.Addr = s
	return nil
}

// Choice is a flag.Value holding one of Choices in Value (its default
// when the flag is defined).
type Choice struct {
	Value   string
	Choices []string
}

func (v *Choice) String() string { return v.Value }

func (v *Choice) Set(s string) error {
	if !slices.Contains(v.Choices, s) {
		return fmt.Errorf("want %s", strings.Join(v.Choices, " or "))
	}
	v.Value = s
	return nil
}

// List is a flag.Value holding a comma-separated list of non-empty items
// in *List, spaces around items trimmed; with EmptyOK, "" is the empty
// list.
type List struct {
	List    *[]string
	EmptyOK bool
}

func (v *List) String() string {
	if v.List == nil {
		return ""
	}
	return strings.Join(*v.List, ",")
}

func (v *List) Set(s string) error {
	if v.EmptyOK && strings.TrimSpace(s) == "" {
		*v.List = nil
		return nil
	}
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return fmt.Errorf("empty item in %q", s)
		}
		items = append(items, item)
	}
	*v.List = items
	return nil
}

// Bool is a flag.Value holding a boolean in *B: a flag given alone is
// true, and a refusal says what it takes, where the flag package's own
// says only "parse error".
type Bool struct{ B *bool }

// IsBoolFlag lets the flag stand alone (--name means --name=true).
func (v Bool) IsBoolFlag() bool { return true }

func (v Bool) String() string {
	if v.B == nil {
		return "false"
	}
	return strconv.FormatBool(*v.B)
}

func (v Bool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*v.B = b
	return nil
}
