package acp

import (
	"reflect"
	"testing"
)

// TestSafeAgentCoversAgent: the SDK reaches the agent only through safeAgent, so a method
// added to agent and not to safeAgent would silently go unserved (the SDK finds optional
// methods by type assertion).
func TestSafeAgentCoversAgent(t *testing.T) {
	inner, outer := reflect.TypeFor[*agent](), reflect.TypeFor[safeAgent]()
	for i := range inner.NumMethod() {
		m := inner.Method(i)
		if _, ok := outer.MethodByName(m.Name); !ok {
			t.Errorf("agent.%s is not offered by safeAgent", m.Name)
		}
	}
}
