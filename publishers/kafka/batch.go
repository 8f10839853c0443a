package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqtarget/mqtarget/publishers"
)

// PublishBatch's records go in one produce request holding one record batch, which Kafka appends
// whole or not at all. franz-go's producer cannot promise that (it cuts requests from what is buffered
// when a connection is free: measured, 2 of 500 five-record batches split), so PublishBatch builds the
// batch and sends the request itself, on franz-go's connection to the partition's leader. Its batches
// are not idempotent (producer id -1): they are never resent, by franz-go or by us, so a batch whose
// answer is lost is reported as failed and may be stored once.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordBatch encodes bodies as one uncompressed v2 record batch (magic 2) without a producer id.
func recordBatch(bodies [][]byte, now time.Time) []byte {
	var recs []byte
	for i, b := range bodies {
		r := kmsg.Record{OffsetDelta: int32(i), Value: b}
		enc := r.AppendTo(nil)[1:] // without its length, Length 0 being one varint byte
		recs = binary.AppendVarint(recs, int64(len(enc)))
		recs = append(recs, enc...)
	}
	ms := now.UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(bodies) - 1),
		FirstTimestamp: ms, MaxTimestamp: ms, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(bodies)), Records: recs,
	}
	batch.Length = int32(49 + len(recs)) // what follows the length field
	out := batch.AppendTo(nil)
	// the CRC covers everything from the attributes (after offset 8, length 4, epoch 4, magic 1, crc 4)
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], castagnoli))
	return out
}

// produceBatch sends bodies to topic's partition for host in one produce request, within ctx (and
// publish_timeout), and checks the answer: one topic, that partition, no error.
func (p *Publisher) produceBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	for try := 1; ; try++ {
		err := p.produceBatchOnce(ctx, host, topic, bodies)
		// NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION and UNKNOWN_TOPIC_ID are the broker's word
		// that it appended nothing, so the batch may go again (no duplicate) to the leader a fresh lookup
		// names: right after mqtarget creates a topic, one broker's metadata names a leader that is not
		// leading yet, or that does not know the topic's id yet (produce v13, Kafka 4).
		if try >= batchTries || ctx.Err() != nil || !notYetKnown(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(topicPoll):
		}
	}
}

// batchTries bounds produceBatch's sends of one batch that brokers refused as not theirs.
const batchTries = 5

func (p *Publisher) produceBatchOnce(ctx context.Context, host int, topic string, bodies [][]byte) error {
	total := 0
	for _, b := range bodies {
		total += len(b)
	}
	if total+61+len(bodies)*24 > batchMaxBytes { // a batch's header and each record's
		return kind(publishers.ErrTooLarge, fmt.Errorf("kafka: a batch of %d messages, %d bytes, exceeds the %d bytes of one record batch", len(bodies), total, batchMaxBytes))
	}
	st, err := p.topic(ctx, topic)
	if err != nil {
		return err
	}
	part := st.parts[host]
	if part < 0 {
		return kind(publishers.ErrUnavailable, fmt.Errorf("kafka: topic %s has no partition for host %d (broker %d)", topic, host, p.nodes[host]))
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	if p.cfg.Acks == AcksLeader {
		req.Acks = 1
	}
	timeout := p.cfg.PublishTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	req.TimeoutMillis = int32(max(timeout, time.Millisecond).Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, st.id // the name up to v12, the id from v13
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, recordBatch(bodies, time.Now())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	ch := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	p.gate.RLock()
	if p.closed {
		p.gate.RUnlock()
		cancel()
		return kind(publishers.ErrClosed, errors.New("kafka publisher closed"))
	}
	q := &pending{p: p, host: host, done: func(err error) { ch <- err }, cancel: cancel}
	p.register(q, 0)
	p.gate.RUnlock()
	resp, err := req.RequestWith(rctx, p.cl.Broker(int(st.leaders[part])))
	switch {
	case err != nil && ctx.Err() != nil:
		q.finish(ctxErr(ctx))
	case err != nil:
		p.forget(topic, st) // the leader may have moved while its broker was away
		q.finish(classify(err))
	default:
		q.finish(p.checkProduce(resp, topic, st, part))
	}
	return <-ch
}

// checkProduce checks a produce answer for one topic and partition.
func (p *Publisher) checkProduce(resp *kmsg.ProduceResponse, topic string, st *topicState, part int32) error {
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != part ||
		resp.Topics[0].Topic != topic && resp.Topics[0].TopicID != st.id {
		return kind(publishers.ErrUnavailable, fmt.Errorf("kafka: the produce answer is not for %s/%d: %d topics", topic, part, len(resp.Topics)))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		if notYetKnown(err) {
			p.forget(topic, st) // the leader moved, or the topic went: look it up again next time
		}
		return classify(fmt.Errorf("kafka: produce to %s/%d: %w", topic, part, err))
	}
	return nil
}

// notYetKnown: the broker refused a produce as not its partition's, appending nothing.
func notYetKnown(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.UnknownTopicID)
}

// forget drops topic's partition map if it is st.
func (k *cluster) forget(topic string, st *topicState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.topics[topic] == st {
		delete(k.topics, topic)
	}
}
