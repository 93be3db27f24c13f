package writer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/writer/consumer"
)

// Headers of a dead letter. Its body is the original message body.
const (
	// HeaderError is "<reason>: <message>", reason being one of the codes
	// listed in docs/events.md.
	HeaderError = "Eventide-Error"
	// HeaderOriginalSubject is the subject the message was published to.
	HeaderOriginalSubject = "Eventide-Original-Subject"
	// HeaderStreamSeq is the message's sequence in the event stream.
	HeaderStreamSeq = "Eventide-Stream-Seq"
	// HeaderTruncated is set, to the original body's length, when the body
	// had to be cut to fit the server's max_payload with these headers.
	HeaderTruncated = "Eventide-Truncated"
)

// dlqPublishTimeout bounds one wait for the dead-letter stream's ack.
const dlqPublishTimeout = 5 * time.Second

// deadLetter builds the dead letter of the message at seq: the original
// body and non-NATS headers, plus the reason and where it came from. Its
// Nats-Msg-Id makes a redelivered reject a duplicate the stream drops.
func (w *Writer) deadLetter(m jetstream.Msg, epoch, seq uint64, rej *rejection) *nats.Msg {
	dl := nats.NewMsg(w.cfg.DLQSubjectPrefix() + w.validator.dlqType(m.Subject()))
	// The producer's headers come along unless they alone would take a
	// large part of the server's max payload.
	if orig := m.Headers(); consumer.HeaderSize(orig) <= int(w.nc.MaxPayload())/4 {
		for k, vs := range orig {
			if strings.HasPrefix(strings.ToLower(k), "nats-") {
				continue // Nats-Msg-Id, Nats-Expected-*: meant for the original publish
			}
			for _, v := range vs {
				dl.Header.Add(k, v)
			}
		}
	}
	dl.Header.Set(HeaderError, headerValue(rej.Error()))
	dl.Header.Set(HeaderOriginalSubject, headerValue(m.Subject()))
	dl.Header.Set(HeaderStreamSeq, strconv.FormatUint(seq, 10))
	dl.Header.Set(jetstream.MsgIDHeader, w.deadLetterID(epoch, seq))
	body := m.Data()
	if limit := int(w.nc.MaxPayload()) - consumer.HeaderSize(dl.Header) - 64; len(body) > limit {
		dl.Header.Set(HeaderTruncated, strconv.Itoa(len(body)))
		body = body[:max(limit, 0)]
	}
	dl.Data = body
	return dl
}

// deadLetterID is the Nats-Msg-Id of the dead letter of the message at
// seq: "dlq-<stream>-<seq>", with the checkpoint epoch after a reset
// ("dlq-<stream>-e<epoch>-<seq>") so that a recreated stream's rejects are
// not mistaken for the old stream's within the deduplication window.
func (w *Writer) deadLetterID(epoch, seq uint64) string {
	if epoch == 0 {
		return fmt.Sprintf("dlq-%s-%d", w.cfg.Stream, seq)
	}
	return fmt.Sprintf("dlq-%s-e%d-%d", w.cfg.Stream, epoch, seq)
}

// publishDeadLetters publishes letters to the dead-letter stream and waits
// for its acks, retrying the failed ones until all are stored. It gives up
// only when ctx is done, after at least one attempt.
func (w *Writer) publishDeadLetters(ctx context.Context, letters []*nats.Msg) error {
	attempt := 0
	for len(letters) > 0 {
		failed, firstErr := w.publishOnce(letters)
		if len(failed) == 0 {
			return nil
		}
		letters = failed
		w.m.dlqFailures.Add(float64(len(failed)))
		w.warn.Warn("cannot publish to the dead-letter stream; retrying", "stream", w.cfg.DLQStream,
			"letters", len(letters), "err", firstErr)
		if !consumer.Backoff(ctx, attempt) {
			return fmt.Errorf("dead-letter publish abandoned: %w (last error: %v)", ctx.Err(), firstErr)
		}
		attempt++
	}
	return nil
}

func (w *Writer) publishOnce(letters []*nats.Msg) (failed []*nats.Msg, firstErr error) {
	fail := func(m *nats.Msg, err error) {
		failed = append(failed, m)
		if firstErr == nil {
			firstErr = err
		}
	}
	type inflight struct {
		m *nats.Msg
		f jetstream.PubAckFuture
	}
	var pending []inflight
	for _, m := range letters {
		f, err := w.js.PublishMsgAsync(m, jetstream.WithExpectStream(w.cfg.DLQStream))
		if err != nil {
			fail(m, err)
			continue
		}
		pending = append(pending, inflight{m, f})
	}
	wait, cancel := context.WithTimeout(context.Background(), dlqPublishTimeout)
	defer cancel()
	for _, p := range pending {
		select {
		case <-p.f.Ok():
			continue
		case err := <-p.f.Err():
			fail(p.m, err)
			continue
		case <-wait.Done():
		}
		select { // the wait is over: take only what has already arrived
		case <-p.f.Ok():
		case err := <-p.f.Err():
			fail(p.m, err)
		default:
			fail(p.m, fmt.Errorf("no ack from stream %s within %s", w.cfg.DLQStream, dlqPublishTimeout))
		}
	}
	return failed, firstErr
}

// headerValue makes s safe as a header value: no line breaks.
func headerValue(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
