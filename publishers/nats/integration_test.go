package nats_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/nats"
)

// TestIntegrationLedger runs against real nats-servers (scripts/nats.sh start, one per address):
// MQTARGET_NATS_SERVERS lists their client addresses and MQTARGET_NATS_MONITORS their monitor
// addresses, in the same order. What Publish, PublishBatch and PublishAsync acknowledged to host k must
// be what server k's /jsz reports for the topic's stream, and nothing of it on the other servers.
func TestIntegrationLedger(t *testing.T) {
	servers, monitors := os.Getenv("MQTARGET_NATS_SERVERS"), os.Getenv("MQTARGET_NATS_MONITORS")
	if servers == "" || monitors == "" {
		t.Skip("MQTARGET_NATS_SERVERS and MQTARGET_NATS_MONITORS are not set (scripts/nats.sh start; see docs/nats.md)")
	}
	addrs, mons := strings.Split(servers, ","), strings.Split(monitors, ",")
	if len(addrs) != len(mons) {
		t.Fatalf("%d servers, %d monitors", len(addrs), len(mons))
	}
	p := open(t, addrs, nil)
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := "itest.ledger." + hex.EncodeToString(b[:])
	stream := nats.StreamName(topic)
	acked := make([]int, len(addrs))
	for host := range addrs {
		// a different number on each host, so a message on the wrong server shows in the counts
		for i := range 5 + host {
			if err := p.Publish(ctx(t), host, topic, fmt.Appendf(nil, "sync %d %d", host, i)); err != nil {
				t.Fatalf("host %d: Publish: %v", host, err)
			}
			acked[host]++
		}
		for range 3 {
			if err := p.PublishBatch(ctx(t), host, topic, [][]byte{[]byte("b1"), []byte("b2")}); err != nil {
				t.Fatalf("host %d: PublishBatch: %v", host, err)
			}
			acked[host] += 2
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 50 {
			wg.Add(1)
			if err := p.PublishAsync(host, topic, fmt.Appendf(nil, "async %d", i), func(err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("host %d: PublishAsync's done: %v", host, err)
					return
				}
				mu.Lock()
				acked[host]++
				mu.Unlock()
			}); err != nil {
				t.Fatalf("host %d: PublishAsync: %v", host, err)
			}
		}
		wg.Wait()
	}
	for k, mon := range mons {
		got := jszMessages(t, mon, stream)
		if got != acked[k] {
			t.Errorf("server %d (%s): /jsz reports %d messages in stream %s, %d were acknowledged to host %d", k, addrs[k], got, stream, acked[k], k)
		}
		t.Logf("server %d: %d acknowledged, /jsz reports %d", k, acked[k], got)
	}
}

// jszMessages is the message count of stream as the monitor at mon reports it (/jsz?streams=true); 0
// when the server has no such stream.
func jszMessages(t testing.TB, mon, stream string) int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no idle connection outlives the test
	resp, err := client.Get("http://" + mon + "/jsz?streams=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					Messages int `json:"messages"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		t.Fatal(err)
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.State.Messages
			}
		}
	}
	return 0
}
