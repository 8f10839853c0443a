package amqp

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestIntegrationTLS: against RabbitMQ's TLS listener (scripts/rabbitmq.sh with RABBITMQ_AMQPS_PORT:
// MQTARGET_AMQP_TEST_TLS_URL an amqps:// URL of it, MQTARGET_AMQP_TEST_TLS_CA the script's CA; the node
// of MQTARGET_AMQP_TEST_URLS), what Publish, PublishBatch and PublishAsync acknowledge over TLS is what
// the queue holds, counted by rabbitmqctl; with the system's roots, or over TLS to the plain listener,
// the publish is refused as unavailable within dial_timeout. TestTLS asks the same of a fake broker,
// with more settings.
func TestIntegrationTLS(t *testing.T) {
	testlane.Lock(t, "rabbitmq") // the node other packages stop and restart
	plain := integrationURLs(t)[0]
	url, ca := os.Getenv("MQTARGET_AMQP_TEST_TLS_URL"), os.Getenv("MQTARGET_AMQP_TEST_TLS_CA")
	if url == "" || ca == "" {
		t.Skip("MQTARGET_AMQP_TEST_TLS_URL and MQTARGET_AMQP_TEST_TLS_CA are not set (scripts/rabbitmq.sh with RABBITMQ_AMQPS_PORT makes a TLS listener)")
	}
	srv, err := parse(url)
	if err != nil || !srv.tls {
		t.Fatalf("MQTARGET_AMQP_TEST_TLS_URL: want an amqps:// URL (%v)", err)
	}
	topic := freshName("tls")
	t.Cleanup(func() { ctl(t, "delete_queue", "-p", srv.vhost, topic) })
	p, _ := newTestPublisher(t, []string{url}, func(c *Config) { c.TLSConfig = publishers.TLSConfig{Enabled: true, CAFile: ca} })
	acked := 0
	for range 3 {
		if err := p.Publish(ctxT(t, 10*time.Second), 0, topic, []byte("tls")); err != nil {
			t.Fatalf("Publish over TLS: %v", err)
		}
		acked++
	}
	if err := p.PublishBatch(ctxT(t, 10*time.Second), 0, topic, [][]byte{[]byte("b1"), []byte("b2")}); err != nil {
		t.Fatalf("PublishBatch over TLS: %v", err)
	}
	acked += 2
	if err := publishertest.AsyncResult(p, 0, topic, []byte("async"), 10*time.Second); err != nil {
		t.Fatalf("PublishAsync over TLS: %v", err)
	}
	acked++
	if got := queueMessages(t, srv.vhost, topic); got != acked {
		t.Errorf("%s holds %d messages, %d acknowledged over TLS (rabbitmqctl list_queues)", topic, got, acked)
	}
	if v := p.BrokerVersion(0); !strings.Contains(v, "RabbitMQ") {
		t.Errorf("BrokerVersion over TLS = %q, want RabbitMQ's", v)
	}

	for _, tc := range []struct {
		name, url string
		tls       publishers.TLSConfig
	}{
		{"the system's roots", url, publishers.TLSConfig{Enabled: true}},
		{"TLS to the plain listener", strings.Replace(plain, "amqp://", "amqps://", 1), publishers.TLSConfig{Enabled: true, CAFile: ca}},
	} {
		p, _ := newTestPublisher(t, []string{tc.url}, func(c *Config) { c.TLSConfig = tc.tls }) // dial_timeout 1 s
		publishertest.RefusedWithin(t, tc.name, 5*time.Second, func() error {
			return p.Publish(ctxT(t, 10*time.Second), 0, topic, []byte("refused"))
		})
		_ = p.Close()
	}
	if got := queueMessages(t, srv.vhost, topic); got != acked {
		t.Errorf("%s holds %d messages after the refused publishes, want the %d acknowledged", topic, got, acked)
	}
}
