package engine

import "math"

// info is the meter's last figures without refreshing them (no store read): what a turn's
// outcome carries for metrics. Max is 0 before the session's first model call.
func (c contextMeter) info() ContextInfo {
	ci := ContextInfo{Used: c.used, Max: c.window, Estimated: c.estimated, Compressions: c.compressions}
	if ci.Max > 0 {
		ci.Percent = int(math.Round(100 * float64(ci.Used) / float64(ci.Max)))
	}
	return ci
}
