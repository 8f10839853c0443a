//go:build !unix

package closedloop

import "time"

// processCPU: unknown here (0), so results carry no client CPU.
func processCPU() time.Duration { return 0 }
