package lua

import (
	"github.com/hermes-go/hermes/scripting/internal/guard"
)

// SetMeter makes the counted natives charge m (the memory budget of the run in progress).
func (v *VM) SetMeter(m guard.Meter) { v.meter = m }

// Tripped returns the limit the last run hit, or nil. A tripped VM must not decide anything:
// whatever the script returned after the limit hit is void.
func (v *VM) Tripped() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.tripped
}
