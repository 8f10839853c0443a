package itest

import (
	"fmt"
	"os"
	"strings"
)

// gone reports an error while process pid exists and is not a zombie (a killed broker that was started
// detached is reaped by init, maybe later).
func gone(pid int) error {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	if f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
		return nil
	}
	return fmt.Errorf("process %d still runs", pid)
}
