package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqtarget/mqtarget/publishers"
)

// unavailableCodes are the error codes that say the cluster cannot take a record now (no leader, too
// few replicas, a broker or its disk down); any other code a produce ends with is a refusal of the
// record, also those Kafka calls retriable (CORRUPT_MESSAGE): franz-go retried those it retries.
var unavailableCodes = map[int16]bool{
	kerr.NotLeaderForPartition.Code:        true,
	kerr.LeaderNotAvailable.Code:           true,
	kerr.NotEnoughReplicas.Code:            true,
	kerr.NotEnoughReplicasAfterAppend.Code: true,
	kerr.BrokerNotAvailable.Code:           true,
	kerr.NetworkException.Code:             true,
	kerr.KafkaStorageError.Code:            true,
	kerr.CoordinatorNotAvailable.Code:      true,
	kerr.FencedLeaderEpoch.Code:            true,
	kerr.UnknownLeaderEpoch.Code:           true,
	kerr.ReplicaNotAvailable.Code:          true,
	kerr.ThrottlingQuotaExceeded.Code:      true,
	kerr.UnknownTopicOrPartition.Code:      true, // deleted under us, or not yet known to this broker
	kerr.UnknownTopicID.Code:               true, // the same, named by id (produce v13)
	kerr.OffsetNotAvailable.Code:           true,
	kerr.PreferredLeaderNotAvailable.Code:  true,
	kerr.EligibleLeadersNotAvailable.Code:  true,
}

// kind wraps err with the error kind the HTTP layer maps to a status code.
func kind(k, err error) error { return fmt.Errorf("%w: %w", k, err) }

// classify gives a produce outcome its kind. Kafka's answers: a retriable error code (not the leader,
// not enough replicas, ...) that franz-go gave up on means the cluster cannot take the record now
// (unavailable); the broker's own request timeout is a timeout; an oversize record is too large; any
// other error code is a refusal, MESSAGE_TOO_LARGE too: what the client can tell is too large is
// refused before it is sent (MaxBody, ErrTooLarge), so that answer is a topic's or broker's lower bound. Errors without a code are the client's: closed, buffered records at
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
	case errors.As(err, &ke):
		if unavailableCodes[ke.Code] {
			return kind(publishers.ErrUnavailable, err)
		}
		return kind(publishers.ErrRejected, err)
	case errors.Is(err, context.Canceled):
		return err
	default: // dial and connection failures, ErrMaxBuffered, retries exhausted
		return kind(publishers.ErrUnavailable, err)
	}
}
