package engine

// Principal is who a request acts for, as far as sessions go. Every session records the ID of
// the principal that created it (store.Session.Principal); branches and sub-agents inherit
// their parent's. Surfaces check Sees before they show or touch a session, and report a
// session another principal owns exactly like one that does not exist.
type Principal struct {
	ID    string // recorded on the sessions it creates; "" is the local owner
	Name  string // for messages and logs; never the key itself
	Admin bool   // sees and acts on every session
}

// LocalOwner is the person at this machine: the CLI, ACP, the stdio gateway and the HTTP
// server's primary API key. Sessions stored without an owner are theirs.
var LocalOwner = Principal{Name: "local"}

// Sees reports whether p may see and act on a session owned by owner.
func (p Principal) Sees(owner string) bool { return p.Admin || owner == p.ID }
