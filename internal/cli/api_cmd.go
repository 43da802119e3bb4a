package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/hermes-go/hermes/stdlib"
)

// runAPI prints what is generated from the script API's one definition; the files shipped in
// scripts/types and scripts/API.md are its output.
func runAPI(_ context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.SetOutput(io.err)
	format := fs.String("format", "md", "ts (a .d.ts for editors and tsc), lua (EmmyLua annotations for lua-language-server) or md (the reference page)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return 2
	}
	switch *format {
	case "ts":
		fmt.Fprint(io.out, stdlib.TypeScriptDeclarations())
	case "lua":
		fmt.Fprint(io.out, stdlib.LuaAnnotations())
	case "md":
		fmt.Fprint(io.out, stdlib.Reference())
	default:
		fmt.Fprintf(io.err, "hermes api: unknown --format %q (ts, lua, md)\n", *format)
		return 2
	}
	return 0
}
