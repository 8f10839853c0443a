package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/mqtarget/mqtarget/internal/version"
)

// showConfig serves /config, so a load run can record which build and configuration it measured.
func (s *Server) showConfig(w http.ResponseWriter, _ *http.Request) {
	v := version.Get()
	body, err := json.MarshalIndent(map[string]any{
		"version": map[string]string{"version": v.Version, "revision": v.Revision, "go_version": v.GoVersion},
		"config":  s.config,
	}, "", "  ")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "", "config: "+err.Error(), 0)
		return
	}
	writeJSON(w, http.StatusOK, append(body, '\n'))
}
