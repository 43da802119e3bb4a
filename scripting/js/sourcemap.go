package js

import (
	"errors"

	"github.com/dop251/goja/parser"
)

// parseOpts is how every script, module, policy and REPL line is parsed. A source map inline in
// the source (a data: URL, as the TypeScript loader writes) is read; one named by a path or URL
// is not: goja would read it from disk, outside the script's grants (a path such as /dev/zero
// would also never end).
var parseOpts = []parser.Option{parser.WithSourceMapLoader(func(string) ([]byte, error) {
	return nil, errSourceMapFile
})}

var errSourceMapFile = errors.New("source maps are read only inline")
