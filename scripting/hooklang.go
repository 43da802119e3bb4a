package scripting

// HookLang is the language of the hook that decides hook ("approval", "busy_input", "steer",
// "route") for the session: "js" or "lua" for a script's, "go" for a built-in default. The
// engine reports it on its policy spans.
func (s *Sessions) HookLang(sessionID, hook string) string {
	set, base := s.lookup(sessionID), s.base
	var h, b any
	switch hook {
	case HookApproval:
		h, b = set.Approver, base.Approver
	case HookBusyInput:
		h, b = set.Busy, base.Busy
	case HookSteer:
		h, b = set.Steer, base.Steer
	case HookRoute:
		h, b = set.Route, base.Route
	default:
		return "go"
	}
	if h == nil {
		h = b
	}
	if l, ok := h.(interface{ Lang() string }); ok {
		return l.Lang()
	}
	return "go"
}
