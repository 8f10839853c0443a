package publishers

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Bounds of the broker sections' settings, beyond which a value is a mistake, not a choice.
const (
	// MaxHosts bounds each broker's address list: every address gets connections, goroutines and
	// metric series (10 000 made /metrics 138 MB).
	MaxHosts         = 64
	MaxDialTimeout   = time.Minute
	MaxEmbeddedBytes = 1 << 40
	// MaxPublishTimeout bounds publish_timeout and the broker send timeouts: a request waits that long.
	MaxPublishTimeout = 5 * time.Minute
)

// validateAddrs checks a broker's address list, key being its setting (e.g. "b.hosts"): at most
// MaxHosts strict host:port addresses, none twice.
func ValidateAddrs(key string, addrs []string) error {
	if len(addrs) > MaxHosts {
		return fmt.Errorf("%s: %d addresses, at most %d are allowed", key, len(addrs), MaxHosts)
	}
	var errs []error
	seen := make(map[string]int, len(addrs))
	for i, a := range addrs {
		if err := ValidateHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", key, i, err))
		} else if j, dup := seen[a]; dup {
			errs = append(errs, fmt.Errorf("%s[%d]: %q repeats %s[%d]", key, i, a, key, j))
		} else {
			seen[a] = i
		}
	}
	return errors.Join(errs...)
}

// ValidateHostPort accepts what can be dialled as written: host:port with a port 1..65535 in decimal,
// a host that is an IPv4 address, an IPv6 address in brackets ([::1]:4150) or a DNS name (labels of
// letters, digits, '-' and '_', 1..63 each, 253 in all), and nothing else: no spaces, which the
// resolver would otherwise look up as part of a name at dial time.
func ValidateHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port (an IPv6 address goes in brackets: [::1]:4150): %v", a, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '0' {
		return fmt.Errorf("%q: the port must be a number 1..65535", a)
	}
	switch {
	case host == "":
		return fmt.Errorf("%q has no host", a)
	case strings.HasPrefix(a, "["):
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() {
			return fmt.Errorf("%q: %q in brackets is not an IPv6 address", a, host)
		}
	case strings.Trim(host, "0123456789.") == "":
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%q: %q is not an IPv4 address", a, host)
		}
	default:
		if err := validateDNSName(host); err != nil {
			return fmt.Errorf("%q: %w", a, err)
		}
	}
	return nil
}

var dnsLabel = NewNameChars("-_")

func validateDNSName(host string) error {
	name := strings.TrimSuffix(host, ".") // a fully qualified name
	if len(name) > 253 {
		return fmt.Errorf("host name of %d characters, at most 253", len(name))
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) > 63 || !dnsLabel.All(label) || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a host name (labels of 1-63 letters, digits, '-' and '_', not starting or ending with '-'), nor an IP address", host)
		}
	}
	return nil
}
