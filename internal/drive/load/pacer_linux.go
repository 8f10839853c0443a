package load

import (
	"syscall"
	"time"
)

const prSetTimerSlack = 29 // PR_SET_TIMERSLACK, linux/prctl.h

// tightenTimerSlack sets this thread's timer slack to 1 ns (default 50 µs, by which nanosleep may be
// late); harmless when refused.
func tightenTimerSlack() { _, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0) }

func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: the caller sleeps the rest
}
