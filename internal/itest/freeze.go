package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freeze stops process pid with SIGSTOP and returns only once every one of its threads has stopped:
// SIGSTOP is delivered asynchronously, and on a busy machine a thread can go on answering for a while,
// which made "the broker is frozen" checks see answers.
func freeze(t testing.TB, pid int) {
	t.Helper()
	must(t, syscall.Kill(pid, syscall.SIGSTOP))
	Eventually(t, 10*time.Second, fmt.Sprintf("process %d stopped", pid), func() error { return stopped(pid) })
}

// stopped reports an error unless every thread of process pid is stopped (state T in /proc).
func stopped(pid int) error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("no threads of process %d: %v", pid, err)
	}
	for _, task := range tasks {
		raw, err := os.ReadFile(task)
		if err != nil {
			return err
		}
		// The state follows the command name, which is in parentheses and may contain anything.
		rest := string(raw[strings.LastIndexByte(string(raw), ')')+1:])
		if f := strings.Fields(rest); len(f) == 0 || (f[0] != "T" && f[0] != "t") {
			return fmt.Errorf("thread %s is running", task)
		}
	}
	return nil
}

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
