//go:build !linux

package load

import "time"

func tightenTimerSlack() {}

// preciseSleep is a timer's sleep where nanosleep's slack cannot be set: the lag it adds is measured
// (lag_ms) and shown, not hidden.
func preciseSleep(d time.Duration) { time.Sleep(d) }
