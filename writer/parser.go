package writer

import (
	"strings"
	"time"

	"github.com/eventide/eventide/bucket/schema"
)

// Parser validates messages of the event stream by the writer's rules and
// gives each valid one the event, and so the event id, the writer stores
// for it. Other consumers of the stream (the fan-out worker) use it so
// that they see exactly the events in the events table: an event sent
// without an id gets the id derived from (stream, epoch, seq), the same
// one the writer derives.
type Parser struct {
	cfg Config
	v   *validator
}

// NewParser returns a Parser for the stream cfg describes; cfg is the
// writer's configuration (Stream, Subjects, Types, AllowTypes,
// MaxPayload, MaxSkew matter).
func NewParser(cfg Config) (*Parser, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Parser{cfg: cfg, v: newValidator(cfg)}, nil
}

// Parse validates the message at stream sequence seq of checkpoint epoch
// epoch as of now. It returns the event, or the writer's rejection reason
// (a value of the Eventide-Error header, docs/events.md) and a message
// for a human. Time-dependent checks (time_in_future,
// expired_on_arrival) depend on now: pass a time fixed per message (its
// stream time) where the outcome must not change on redelivery.
func (p *Parser) Parse(subject string, body []byte, epoch, seq uint64, now time.Time) (ev schema.Event, reason, message string) {
	pe, rej := p.v.parse(subject, body, msgIdentity{stream: p.cfg.Stream, epoch: epoch, seq: seq}, now)
	if rej != nil {
		return schema.Event{}, rej.reason, rej.message
	}
	return pe.event, "", ""
}

// Stream is the name of the stream the Parser's ids are derived for.
func (p *Parser) Stream() string { return p.cfg.Stream }

// TypeSubjects returns the subjects that carry events of the given types:
// for each stream subject ending in ">", the subject with the type in
// place of ">". It returns nil when a stream subject has no ">" (its
// messages name their type only in the body, so no subject filter can
// select them): the caller then has to read every subject.
func (p *Parser) TypeSubjects(types []string) []string {
	var out []string
	for _, s := range p.cfg.storedSubjects() {
		prefix, ok := strings.CutSuffix(s, ">")
		if !ok || (prefix != "" && !strings.HasSuffix(prefix, ".")) {
			return nil
		}
		for _, t := range types {
			out = append(out, prefix+t)
		}
	}
	return out
}
