package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqtarget/mqtarget/publishers"
)

// kind wraps err with the error kind the HTTP layer maps to a status code.
func kind(k, err error) error { return fmt.Errorf("%w: %w", k, err) }

// classify gives a produce outcome its kind. Kafka's answers: a retriable error code (not the leader,
// not enough replicas, ...) that franz-go gave up on means the cluster cannot take the record now
// (unavailable); the broker's own request timeout is a timeout; an oversize record is too large; any
// other error code is a refusal. Errors without a code are the client's: closed, buffered records at
// their bound, a record that outlived publish_timeout, a connection that failed.
func classify(err error) error {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, publishers.ErrClosed), errors.Is(err, publishers.ErrTimeout),
		errors.Is(err, publishers.ErrUnavailable), errors.Is(err, publishers.ErrRejected), errors.Is(err, publishers.ErrTooLarge):
		return err // ours already
	case errors.Is(err, kgo.ErrClientClosed):
		return kind(publishers.ErrClosed, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kerr.RequestTimedOut):
		return kind(publishers.ErrTimeout, err)
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return kind(publishers.ErrTooLarge, err)
	case errors.As(err, &ke):
		if ke.Retriable {
			return kind(publishers.ErrUnavailable, err)
		}
		return kind(publishers.ErrRejected, err)
	case errors.Is(err, context.Canceled):
		return err
	default: // dial and connection failures, ErrMaxBuffered, retries exhausted
		return kind(publishers.ErrUnavailable, err)
	}
}
