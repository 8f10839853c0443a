// Package rabbitmqctl runs rabbitmqctl against the RabbitMQ node of scripts/rabbitmq.sh, for tests
// that count what the broker holds with its own tool or give it users and vhosts. It imports nothing
// of mqtarget, so a broker package's own tests can use it as internal/itest does.
package rabbitmqctl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Timeout bounds one rabbitmqctl run: an Erlang VM starts for each (seconds on a busy machine).
const Timeout = time.Minute

// Node is a node scripts/rabbitmq.sh started.
type Node struct {
	Script string   // scripts/rabbitmq.sh; empty: this tree's
	Env    []string // the RABBITMQ_* settings of the node's start, added to the process's environment
}

// Run runs `scripts/rabbitmq.sh ctl ARGS` and returns its output; a failure's error holds the output.
func (n Node) Run(args ...string) (string, error) {
	script := n.Script
	if script == "" {
		_, file, _, _ := runtime.Caller(0)
		script = filepath.Join(filepath.Dir(file), "..", "..", "scripts", "rabbitmq.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script, "ctl"}, args...)...)
	cmd.Env = append(os.Environ(), n.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("scripts/rabbitmq.sh ctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Queues is `rabbitmqctl list_queues -p VHOST name messages`: the messages each queue of vhost holds
// (ready and unacknowledged).
func (n Node) Queues(vhost string) (map[string]int, error) {
	out, err := n.Run("list_queues", "-p", vhost, "-q", "--no-table-headers", "name", "messages")
	if err != nil {
		return nil, err
	}
	return parseQueues(out)
}

// Messages is what queue in vhost holds, as Queues says; -1 when there is no such queue.
func (n Node) Messages(vhost, queue string) (int, error) {
	queues, err := n.Queues(vhost)
	if err != nil {
		return 0, err
	}
	if m, ok := queues[queue]; ok {
		return m, nil
	}
	return -1, nil
}

// parseQueues reads list_queues' "NAME\tMESSAGES" lines.
func parseQueues(out string) (map[string]int, error) {
	queues := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		name, count, ok := strings.Cut(line, "\t")
		v, err := strconv.Atoi(strings.TrimSpace(count))
		if !ok || err != nil || v < 0 {
			return nil, fmt.Errorf("rabbitmqctl list_queues: a line not NAME<tab>MESSAGES: %q", line)
		}
		queues[name] = v
	}
	return queues, nil
}
