package handlers

import (
	"context"
	"time"
)

// StatsAt is /stats' computation as if polled at now, for tests that cannot wait out its window.
func (s *Server) StatsAt(ctx context.Context, now time.Time) (*Stats, error) {
	return s.currentStats(ctx, now)
}

// Started is when the Server was built: the start of /stats' first window.
func (s *Server) Started() time.Time { return s.started }
