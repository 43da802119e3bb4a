package httpapi

import (
	"errors"

	"github.com/hermes-go/hermes/engine/ids"
)

// checkID applies the identifier rule of every edge (ids.Check) to a header or path value: a
// 400 naming the parameter, before anything is looked up or stored.
func checkID(param, code, what, v string) error {
	if err := ids.Check(v); err != nil {
		reason := err.Error()
		var ie *ids.Error
		if errors.As(err, &ie) {
			reason = ie.Reason
		}
		return badRequest(param, code, "invalid "+what+": "+reason)
	}
	return nil
}

// lastEventID reads the SSE resume cursor (Last-Event-ID, or ?last_event_id=). A value that is
// not an event number is a 400: read as "from the start" it would replay the whole stream to
// a client that asked for its tail.
func lastEventID(header, query string) (int, error) {
	v, param := header, "Last-Event-ID"
	if v == "" {
		v, param = query, "last_event_id"
	}
	if v == "" {
		return 0, nil
	}
	n, err := ids.CheckCursor(v)
	if err != nil {
		return 0, badRequest(param, "invalid_last_event_id", "Last-Event-ID must be the decimal id of an event of this stream")
	}
	return n, nil
}
