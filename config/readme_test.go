package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
)

// TestREADMEDocumentsEveryKey keeps the configuration reference in README.md complete: users' scripts
// depend on these names.
func TestREADMEDocumentsEveryKey(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range config.Keys() {
		if !strings.Contains(string(readme), "`"+k[0]+"`") {
			t.Errorf("README.md does not document the setting `%s`", k[0])
		}
	}
}
