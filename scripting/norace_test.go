//go:build !race

package scripting

const raceEnabled = false
