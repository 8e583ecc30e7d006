package control

import (
	"context"
	"encoding/json"
	"time"
)

// status serves daemon.status: the service's part (sessions, bindings,
// store) with the socket's own (connections, uptime, counters, the mount's
// request counts).
func (s *Server) status(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	var p Empty
	if err := decodeParams(MethodStatus, params, &p); err != nil {
		return nil, err
	}
	res, err := s.svc.Status(ctx, c.caller, p)
	if err != nil {
		return nil, err
	}
	res.Connections = s.connCount()
	res.UptimeSeconds = time.Since(s.started).Seconds()
	res.Counters = make(map[string]MethodCounters, len(s.counters))
	for name, mc := range s.counters {
		res.Counters[name] = MethodCounters{Requests: mc.requests.Load(), Errors: mc.errors.Load()}
	}
	if s.cfg.FuseRequests != nil {
		res.FuseRequests = s.cfg.FuseRequests()
	}
	return res, nil
}
