package handlers_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/mqtarget/mqtarget/handlers"
)

// TestMaxDistinctTopics: each broker may be sent to topics.max_distinct distinct topic names; requests
// that would add more get 429 naming the setting and publish nothing, while known names keep working.
func TestMaxDistinctTopics(t *testing.T) {
	type step struct {
		target string
		status int
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"names up to the limit, then 429, known names still served", 3, []step{
			{"/send1?topic=a", 200}, {"/send1?topic=b", 200}, {"/send1?topic=a", 200},
			{"/send1?topic=x&mode=bogus", 400}, // refused otherwise: x is not counted
			{"/send1?topic=c", 200}, {"/send1?topic=d", 429}, {"/send1?topic=b", 200},
		}},
		{"a spread counts each name", 4, []step{
			{"/send1?topics=3", 200},     // load-0..load-2
			{"/send1?topics=5", 429},     // 2 more: 5 > 4
			{"/send1?topics=4", 200},     // 1 more: load-3
			{"/send1?topic=load-2", 200}, // known from the spread
			{"/send1?topics=2", 200},     // narrower: nothing new
			{"/send1?topic=x", 429},      // 5 > 4
			{"/send1", 429},              // "load" itself is a fifth name
		}},
		{"the default topic, once admitted, stays served at the limit", 2, []step{
			{"/send1", 200}, {"/send1?topic=a", 200}, {"/send1?topic=b", 429}, {"/send1", 200}, {"/send1?topic=load", 200},
		}},
		{"the default topic refused at the limit stays refused", 1, []step{
			{"/send1?topic=a", 200}, {"/send1", 429}, {"/send1", 429}, {"/send1?topics=2", 429},
		}},
		{"the default topic admitted through ?topic=", 2, []step{
			{"/send1?topic=load", 200}, {"/send1", 200}, {"/send1?topic=a", 200}, {"/send1", 200}, {"/send1?topic=c", 429},
		}},
		{"a name published before a spread is not counted twice", 3, []step{
			{"/send1?topic=load-1", 200}, {"/send1?topics=3", 200}, {"/send1?topic=z", 429},
		}},
		{"send2Topic counts topic2 too", 2, []step{
			{"/send2Topic", 200}, {"/send2Topic?topic2=other", 429}, {"/send1", 200},
		}},
		{"a spread wider than the limit", 10, []step{{"/send1?topics=11", 429}, {"/send1?topics=10", 200}}},
		{"0: no limit", 0, []step{{"/send1?topics=10000", 200}, {"/send1?topic=new", 200}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newServer(t, newFake(1), func(o *handlers.Options) { o.MaxDistinctTopics = tc.max })
			for _, st := range tc.steps {
				before := len(ts.pub.Calls())
				w := ts.do(http.MethodGet, st.target, "")
				if w.Code != st.status {
					t.Fatalf("%s: status %d, want %d: %s", st.target, w.Code, st.status, w.Body)
				}
				if st.status != http.StatusTooManyRequests {
					continue
				}
				if m := strictJSON(t, w.Body.Bytes()); m["field"] != "topics.max_distinct" {
					t.Errorf("%s: field %v, want topics.max_distinct", st.target, m["field"])
				}
				if after := len(ts.pub.Calls()); after != before {
					t.Errorf("%s: %d publishes despite the 429", st.target, after-before)
				}
			}
		})
	}
}

// TestMaxDistinctTopicsPerBroker: the limit counts each broker's topics apart.
func TestMaxDistinctTopicsPerBroker(t *testing.T) {
	ts := newServer(t, newFake(1), func(o *handlers.Options) {
		o.MaxDistinctTopics = 1
		o.Publishers["other"] = newFake(1)
	})
	for _, st := range []struct {
		target string
		status int
	}{
		{"/send1?topic=a", 200}, {"/send1?topic=b", 429},
		{"/send1?broker=other&topic=b", 200}, {"/send1?broker=other&topic=a", 429},
	} {
		if w := ts.do(http.MethodGet, st.target, ""); w.Code != st.status {
			t.Errorf("%s: status %d, want %d: %s", st.target, w.Code, st.status, w.Body)
		}
	}
}

// TestMaxDistinctTopicsConcurrent: requests racing for the last names never take a broker past the limit,
// and exactly the limit's worth of new names gets through.
func TestMaxDistinctTopicsConcurrent(t *testing.T) {
	const max, clients, perClient = 50, 8, 20
	ts := newServer(t, newFake(1), func(o *handlers.Options) { o.MaxDistinctTopics = max })
	codes := make(chan int, clients*perClient)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				codes <- ts.do(http.MethodGet, "/send1?topic=c"+strconv.Itoa(c)+"-"+strconv.Itoa(i), "").Code
			}
		})
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	if n[200] != max || n[429] != clients*perClient-max {
		t.Errorf("statuses %v, want %d × 200 and %d × 429", n, max, clients*perClient-max)
	}
	topics := map[string]bool{}
	for _, c := range ts.pub.Calls() {
		topics[c.topic] = true
	}
	if len(topics) != max {
		t.Errorf("published to %d topics, want %d", len(topics), max)
	}
}
