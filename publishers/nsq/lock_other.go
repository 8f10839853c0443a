//go:build !unix

package nsq

import (
	"errors"
	"os"
)

// lockFile cannot lock here: data directories are never taken for stale.
func lockFile(*os.File) (bool, error) {
	return false, errors.New("file locks are not supported on this platform")
}
