// Package demo holds the model cassette `hermes demo` plays: the model's side of the demo job,
// recorded once over the OpenAI wire and embedded in the binary so the demo runs offline.
package demo

import _ "embed"

// Cassette is demo.cassette.json, the recording the demo replays.
//
//go:embed demo.cassette.json
var Cassette []byte
