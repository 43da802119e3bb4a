package acp

// Guard exposes the frame guard to the fuzz target.
var Guard = guard
