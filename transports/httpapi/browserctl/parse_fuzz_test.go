package browserctl

import "testing"

// FuzzControllerResult: a controller frame is either a result for a command id or refused.
func FuzzControllerResult(f *testing.F) {
	for _, s := range []string{
		`{"type":"browser.controller.result","command_id":"cmd_1","ok":true,"content":"page"}`,
		`{"type":"browser.controller.result","command_id":"cmd_1","ok":false,"error":"no such element"}`,
		`{"type":"browser.controller.result","command_id":"c","ok":true,"content":{"png":"..."}}`,
		`{"type":"other"}`, `{}`, `[`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, rep, err := parseResult(b)
		if err != nil {
			return
		}
		if id == "" {
			t.Fatalf("%q: a result without a command id", b)
		}
		if rep.IsError && rep.Content == "" {
			t.Fatalf("%q: a failed result without a message", b)
		}
	})
}
