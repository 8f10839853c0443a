//go:build unix

package closedloop

import (
	"syscall"
	"time"
)

// processCPU is the user + system CPU time this process used so far; 0 when the system does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
