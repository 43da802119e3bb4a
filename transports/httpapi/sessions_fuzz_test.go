package httpapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// FuzzParseSessionChat: any body either gives a non-empty prompt or a 400 envelope.
func FuzzParseSessionChat(f *testing.F) {
	for _, s := range []string{
		`{"input":"hi"}`, `{"message":{"content":"x"}}`, `{"message":{"role":"user","content":[{"type":"text","text":"a"}]}}`,
		`{"input":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":"b"}]}`,
		`{"input":[{"type":"text","text":"a"}],"instructions":"s"}`, `[]`, `{"input":null}`, `{"input":[]}`, `{"system_message":1,"input":"a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := parseSessionChat(b)
		if err != nil {
			var ae *wire.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Code == "" {
				t.Fatalf("%q: refusal %v is not a coded 400", b, err)
			}
			return
		}
		if strings.TrimSpace(in.prompt) == "" {
			t.Fatalf("%q: accepted an empty prompt", b)
		}
	})
}
