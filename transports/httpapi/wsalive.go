package httpapi

import (
	"time"

	"github.com/gofiber/contrib/websocket"
)

// wsLiveness pings c every WSPingInterval and gives it WSPingInterval+WSPongTimeout after
// anything it sent (a pong, a message) before its reads time out: a peer that stops
// answering is closed instead of holding its connection forever. The returned func stops
// the pinger. With pings off it does nothing.
func (s *Server) wsLiveness(c *websocket.Conn) (alive func(), stop func()) {
	l := s.opts.Limits
	if l.WSPingInterval <= 0 {
		return func() {}, func() {}
	}
	wait := l.WSPingInterval + l.WSPongTimeout
	if l.WSPongTimeout <= 0 {
		wait = 0
	}
	alive = func() {
		if wait > 0 {
			_ = c.SetReadDeadline(time.Now().Add(wait))
		}
	}
	alive()
	c.SetPongHandler(func(string) error { alive(); return nil })
	write := l.WriteTimeout
	if write <= 0 {
		write = 10 * time.Second
	}
	// The pinger holds the library's connection, not c: c goes back to a pool when the
	// handler returns. stop closes the connection (the handler is done with it) so that a
	// ping blocked on a peer that stopped reading ends, and waits for the pinger.
	ws := c.Conn
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(l.WSPingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(write)); err != nil {
					return
				}
			}
		}
	}()
	return alive, func() {
		close(done)
		_ = ws.Close()
		<-exited
	}
}
