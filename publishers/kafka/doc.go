// Package kafka is mqtarget's Apache Kafka broker: the kafka configuration section, a publisher and a
// group consumer on franz-go (github.com/twmb/franz-go v1.22.3), and everything a registry entry needs
// (Config, DefaultConfig, Validate, New, NewConsumer, ValidateTopic). It imports publishers (the
// contracts and error kinds) and nothing of the other brokers.
//
// # Hosts and partitions
//
// kafka.brokers are bootstrap addresses only. New asks the cluster for its brokers (metadata, within
// 10 s: New fails with ErrUnavailable naming kafka.brokers when it does not answer) and its hosts are
// those brokers in node-id order, as they advertise themselves. A topic mqtarget publishes to or
// consumes from is created on first use when the cluster lacks it: max(kafka.partitions, brokers)
// partitions, partition i with the replicas brokers i, i+1, ... (kafka.replication_factor of them), so
// broker i is its preferred leader. Host k publishes to the lowest partition whose first replica is
// broker k (partition k of the topics mqtarget creates); in a topic made elsewhere without one, to
// partition k if it has one; otherwise the publish is refused as unavailable. Publish(ctx, k, ...) thus
// lands on the partition led by Hosts()[k], and a host beyond the cluster's brokers is refused as
// unavailable naming kafka.brokers.
//
// # Acknowledgements
//
// Publish and PublishAsync go through one franz-go producer: acks all (every in-sync replica, the
// default) or leader (kafka.acks), a manual partitioner, no linger, no compression (the broker stores
// what was sent). The producer is idempotent: franz-go retries a produce whose connection failed on a
// new connection, and the broker stores a retried batch once (producer id and sequence numbers), so
// "acknowledged" means stored exactly once. mqtarget itself never resends. A record's life in the
// client is bounded by publish_timeout (RecordDeliveryTimeout and the broker-side produce timeout), in
// flight too (AllowIdempotentProduceCancellation): without that, franz-go kept a record that was in
// flight on a connection that died and resent it when the broker came back (measured: stored 15 s
// after a kill -9 and a restart, though its caller got 503); the cost is an epoch bump after such a
// record. Records carry no caller context: franz-go fails all of a partition's buffered records when
// the first one's context ends, so one caller's deadline would fail its neighbours. Publish returns
// when the leader answered (per acks), or at the caller's deadline with ErrTimeout; a publish that
// timed out or failed as unavailable may still be stored (once) within publish_timeout, never later.
// PublishAsync's done runs exactly once: with the answer, with ErrTimeout at publish_timeout, or with
// ErrClosed at Close. PublishAsync never waits for the network: a publish to a topic being looked up
// (or created) is queued on that lookup, at most publishers.MaxAsyncWaiting per host (beyond, refused
// as unavailable), and the lookup's goroutine hands it to the client once it ended, or gives done its
// failure; one its deadline or Close answered meanwhile is not sent.
//
// PublishBatch sends its records as one record batch in one produce request of its own (batch.go), on
// franz-go's connection to the partition's leader: Kafka appends a batch whole or not at all. Those
// batches are not idempotent (no producer id) and never resent: a batch whose answer is lost is
// reported as failed and may be stored once.
//
// # Every answer checked
//
// franz-go matches answers to requests by correlation id but takes an answer that arrived before its
// request was written as that request's. The publisher's connections therefore pass through a checker
// (checked.go) that follows the frames both ways and closes the connection at the first answer that is
// not to the oldest request written; ProtocolErrors counts those per host. A produce whose connection
// failed, or a failed dial to a broker, fails every publish pending on that broker at once as
// unavailable, and publishes to it are refused as unavailable for a second after (unless a produce to
// it succeeded since) while franz-go redials: a dead broker costs callers no deadline each (measured
// with kill -9: every publish to it 503 within 1 ms for the 23 s it was down, delivering again 145 ms
// after its start returned). Error codes: those saying the cluster cannot
// take the record now (not the leader, not enough replicas, a broker or its disk unavailable, unknown
// topic or partition) are ErrUnavailable; REQUEST_TIMED_OUT is ErrTimeout; any other code is
// ErrRejected. A message over MaxBody (1 MB less headers), or a batch over one record batch, is refused
// before it is sent with ErrTooLarge; a topic's lower max.message.bytes is the broker's refusal
// (ErrRejected).
//
// # Bounds
//
// The producer buffers at most 100 000 records and 256 MiB; a publish beyond is refused at once as
// unavailable (TryProduce), never blocked. At most 10 000 topics' partition maps are kept (then the map
// starts afresh). The consumer's fetches are bounded (16 MiB an answer, 1 MiB a partition, 4 at once).
// Close is idempotent: it fails every pending publish with ErrClosed, then closes the client, whose
// goroutines all end.
//
// # Consumer
//
// NewConsumer's Consume joins the group ConsumerOptions.Group (default mqtarget-consume) for one topic,
// reads from the earliest retained record when the group has no committed offset, and commits
// automatically (every 5 s and when Consume ends), so a later Consume of that group goes on where it
// left. Delivery.Host is the host whose publishes land on the record's partition.
//
// # Version and counters
//
// Kafka does not tell its version: BrokerVersion is franz-go's guess from the broker's API versions
// ("Kafka v4.1"), learned by Ping (an ApiVersions request). ConnCounts counts franz-go's connections
// per broker (it keeps several per broker and closes idle ones after 30 s; a connection made after one
// of that broker's closed counts as a reopen, whatever closed it).
//
// # Not here
//
// There is no embedded mode: franz-go's in-process fake cluster (pkg/kfake) is not served by the
// module proxy this project builds from. scripts/kafka.sh runs a real Kafka 4.x (KRaft) on 127.0.0.1.
package kafka
