//go:build race

package scripting

// raceEnabled: the race detector multiplies memory use, so RSS ceilings do not apply.
const raceEnabled = true
