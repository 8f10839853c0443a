package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

// TestRMQLoginRefused: a NO_PERMISSION answer refusing the login is 503 on both send paths, naming the
// settings; one refusing the topic stays 502. The remarks are what RocketMQ 5.3.3 (ACL 2.0) answered
// in scripts/rocketmq.sh's ROCKETMQ_AUTH cluster, and ACL 1.0's of 4.x.
func TestRMQLoginRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		code    int
		remark  string
		refused bool
	}{
		{"wrong secret", 16, "check signature failed.", true},
		{"ACL 1.0 wrong secret", 16, "Check signature failed for accessKey=ak", true},
		{"unknown user", 16, "User:nobody is not found.", true},
		{"unknown user at authorization", 16, "User:nobody not found.", true},
		{"disabled user", 16, "User:alice is disabled.", true},
		{"no access key", 16, "username cannot be null.", true},
		{"ACL 1.0 unknown key", 16, "No acl config for nobody", true},
		{"topic not permitted", 16, "User:alice has no permission to access Topic:forbidden from 127.0.0.1, no matched policies.", false},
		{"broker not writable", 16, "the broker[broker-a] sending message is forbidden", false},
		{"other code", 17, "check signature failed.", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.AccessKey = "alice"
			n := &rmqNative{p: &Publisher{cfg: cfg}}
			lib := &Publisher{cfg: cfg}
			for path, err := range map[string]error{
				"native":  n.result(&admin.CodeError{Code: c.code, Remark: c.remark}),
				"library": lib.result(context.Background(), nil, fmt.Errorf("CODE: %d, DESC: %s", c.code, c.remark)),
			} {
				switch {
				case c.refused && (!errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), `refused the login of "alice" (rocketmq.access_key, rocketmq.secret_key)`)):
					t.Errorf("%s: %v, want ErrUnavailable naming the login and its settings", path, err)
				case !c.refused && !errors.Is(err, publishers.ErrRejected):
					t.Errorf("%s: %v, want ErrRejected", path, err)
				case err != nil && !strings.Contains(err.Error(), c.remark):
					t.Errorf("%s: %v, want the broker's words %q", path, err, c.remark)
				}
			}
		})
	}
	t.Run("no access key set", func(t *testing.T) {
		n := &rmqNative{p: &Publisher{cfg: DefaultConfig()}}
		err := n.result(&admin.CodeError{Code: 16, Remark: "username cannot be null."})
		if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "set rocketmq.access_key and rocketmq.secret_key") {
			t.Errorf("%v, want ErrUnavailable asking for rocketmq.access_key", err)
		}
	})
}

// TestRMQNativeLoginRefusedSend: through the native connection, a broker refusing the login answers
// every publish, single and batch, with 503 by its deadline, each sent once (rocketmq.retries resends
// only what may pass the second time).
func TestRMQNativeLoginRefusedSend(t *testing.T) {
	var sends atomic.Int32
	f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte {
		sends.Add(1)
		return rmqTestResponse(rmqResNoPermission, q.opaque, "check signature failed.", false)
	})
	p := newTestRMQNative(t, f, 2*time.Second, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for what, err := range map[string]error{
		"Publish":      p.Publish(ctx, 0, "t", []byte("m")),
		"PublishBatch": p.PublishBatch(ctx, 0, "t", [][]byte{[]byte("a"), []byte("b")}),
	} {
		if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: %v, want ErrUnavailable saying the login was refused", what, err)
		}
	}
	if n := sends.Load(); n != 2 {
		t.Errorf("the broker got %d sends for 2 publishes (rocketmq.retries %d), want 2: a refusal is not resent", n, p.cfg.Retries)
	}
}
