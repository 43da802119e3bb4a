package httpapi

import (
	"maps"

	"github.com/hermes-go/hermes/engine"
)

// contextFields are a session's context use under the reference's names: the tokens of the
// last model call's context (its prompt plus answer, or the estimate of the next request when
// none was reported), the model's window, and the one as a percentage of the other.
func contextFields(ci engine.ContextInfo) map[string]any {
	return map[string]any{"context_used": ci.Used, "context_max": ci.Max, "context_percent": ci.Percent}
}

// addContext puts the session's context use into a run result's usage.
func addContext(res map[string]any, ci engine.ContextInfo) {
	if u, ok := res["usage"].(map[string]any); ok {
		maps.Copy(u, contextFields(ci))
	}
}

// compactionEvent maps a turn's compaction status to the event the runs stream carries:
// run.compacting with the status text and the context that crossed the threshold, then
// run.compacted with the text (how many rows were summarised; the context left shows in the
// run's result); ok is false for any other event.
func compactionEvent(ev engine.Event, sess *engine.Session) (name string, fields map[string]any, ok bool) {
	si, isStatus := ev.Data.(engine.StatusInfo)
	if !isStatus || ev.Type != engine.EvStatus || (si.Kind != "compacting" && si.Kind != "compacted") {
		return "", nil, false
	}
	fields = map[string]any{}
	if si.Kind == "compacting" {
		ci := sess.Context()
		if si.Context != nil { // the figures of that moment: the turn has moved on since
			ci = *si.Context
		}
		fields = contextFields(ci)
	}
	fields["text"] = si.Text
	return "run." + si.Kind, fields, true
}
