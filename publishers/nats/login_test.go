package nats_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestLogin: against a server with a user, nats.user and nats.password_file log in and publish; a wrong
// password is a refused connection, unavailable (503) as with every broker, naming the server's
// reason and never the password.
func TestLogin(t *testing.T) {
	s := startServer(t, server.Options{Username: "loadtest", Password: "s3cret"})
	for _, tc := range []struct {
		name, password string
		ok             bool
	}{
		{"right password", "s3cret", true},
		{"wrong password", "wr0ng-pw", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nats.DefaultConfig()
			c.Servers = []string{s.Addr().String()}
			c.User, c.PasswordFile = "loadtest", filepath.Join(t.TempDir(), "password")
			if err := os.WriteFile(c.PasswordFile, []byte(tc.password+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := nats.New(c, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for range 2 { // the first waits for the dial, the second finds the host failing
				err = p.Publish(ctx(t), 0, "login.topic", []byte("x"))
				switch {
				case tc.ok && err != nil:
					t.Fatalf("Publish: %v", err)
				case !tc.ok && (!errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(strings.ToLower(err.Error()), "authorization")):
					t.Fatalf("Publish: %v, want unavailable naming the authorization violation", err)
				case !tc.ok && strings.Contains(err.Error(), tc.password):
					t.Fatalf("Publish: the password is shown: %v", err)
				case !tc.ok:
					t.Log(err)
				}
			}
		})
	}
}
