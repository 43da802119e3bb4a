package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
)

// checkMCP starts (stdio) or connects to (http) every configured MCP server and lists its
// tools, as hermes mcp status does, each within the doctor's timeout.
func checkMCP(ctx context.Context, rep *doctorReport, cfg *config.Config, o doctorOptions) {
	if len(cfg.MCP.Servers) == 0 {
		rep.add(doctorCheck{Area: "mcp", Name: "servers", Status: statusOK, Detail: "none configured"})
		return
	}
	// Start errors are in the status lines; the log would only repeat them.
	m := mcptool.New(mcpServers(cfg), mcptool.Options{
		Logger: newLogger(io.Discard, slog.LevelError+1), ClientName: "hermes", ClientVersion: version,
		Env: toolEnv(cfg), StartTimeout: o.timeout,
	})
	defer m.Close()
	lctx, cancel := context.WithTimeout(ctx, 2*o.timeout) // a start, then a listing
	defer cancel()
	m.Tools(lctx)
	for _, st := range m.Status() {
		c := doctorCheck{Area: "mcp", Name: st.Name + " (" + st.Transport + ")", Status: statusOK, Detail: fmt.Sprintf("%d tools", st.Tools)}
		s := cfg.MCP.Servers[st.Name]
		if !st.Connected {
			c.Status, c.Detail = statusFail, st.Error
			if c.Detail == "" {
				c.Detail = "not connected"
			}
			if s.Command != "" {
				c.Fix = "check mcp.servers." + st.Name + ".command (" + s.Command + ") and args; run it by hand to see its error"
			} else {
				c.Fix = "check that the server answers at mcp.servers." + st.Name + ".url, and its headers"
			}
		}
		for _, why := range st.Skipped {
			c.More = append(c.More, "skipped "+why)
		}
		if len(st.Skipped) > 0 && c.Status == statusOK {
			c.Status, c.Fix = statusWarn, "the skipped tools are not offered to the model; fix them in the server"
		}
		rep.add(c)
	}
}
