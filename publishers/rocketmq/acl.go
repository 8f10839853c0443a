package rocketmq

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

// A broker with ACL answers NO_PERMISSION both when it refuses the login (authentication: no access
// key, an unknown or disabled user, a wrong signature) and when the user may not publish to the topic
// (authorization). The first is a refused connection, 503 as on every broker; the second is this
// message's own refusal, 502. Only the remark tells them apart; these are its words for the first in
// RocketMQ 5.x (ACL 2.0) and 4.x (ACL 1.0), compared in lower case.
var rmqLoginRefusals = []string{
	"signature failed",        // 2.0 "check signature failed.", 1.0 "Check signature failed for accessKey=..."
	"username cannot be null", // 2.0: the request carries no AccessKey
	"no acl config for",       // 1.0: an unknown access key
	"authentication failed",   // 2.0 proxy and strategy wording
}

// rmqUserRefusals: ACL 2.0's words for a user it does not know or has disabled ("User:x is not
// found.", "User:x not found.", "User:x is disabled."), matched after their "user:" prefix.
var rmqUserRefusals = []string{"not found", "is disabled"}

// rmqNoPermission returns the remark of a NO_PERMISSION answer in err (the native path's CodeError or
// the library's "CODE: 16, DESC: ..." text).
func rmqNoPermission(err error) (remark string, ok bool) {
	var ce *admin.CodeError
	if errors.As(err, &ce) {
		return ce.Remark, ce.Code == rmqResNoPermission
	}
	if code, coded := rmqCode(err); coded && code == rmqResNoPermission {
		_, remark, _ = strings.Cut(err.Error(), "DESC: ")
		return remark, true
	}
	return "", false
}

// rmqDenied reports whether err is a NO_PERMISSION answer, which stored nothing but is not resent:
// mqtarget resends to the same broker, which refuses it the same way (a login or topic its ACL
// refuses, or its writes switched off), where the Java client retries on another broker.
func rmqDenied(err error) bool {
	_, ok := rmqNoPermission(err)
	return ok
}

// rmqLoginRefused reports whether err is a broker's NO_PERMISSION answer refusing the login itself.
func rmqLoginRefused(err error) bool {
	remark, ok := rmqNoPermission(err)
	if !ok {
		return false
	}
	r := strings.ToLower(remark)
	for _, w := range rmqLoginRefusals {
		if strings.Contains(r, w) {
			return true
		}
	}
	if strings.HasPrefix(r, "user:") {
		for _, w := range rmqUserRefusals {
			if strings.Contains(r, w) {
				return true
			}
		}
	}
	return false
}

// errRMQLoginRefused is the 503 for a refused login, naming the settings to look at.
func errRMQLoginRefused(c Config, err error) error {
	if c.AccessKey == "" {
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("the broker refused a client without a login (it has ACL on: set rocketmq.access_key and rocketmq.secret_key): %w", err))
	}
	return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("the broker refused the login of %q (rocketmq.access_key, rocketmq.secret_key): %w", c.AccessKey, err))
}
