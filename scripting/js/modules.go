package js

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"

	"github.com/hermes-go/hermes/stdlib"
)

// File modules: require("./x.js") and import … from "./x.js" load a file relative to the
// module that asks, inside Options.Root only (after following symbolic links). A module is
// loaded once per VM; a cycle sees the exports assigned so far, as in Node. Files written with
// ES module syntax, and TypeScript files (.ts), are turned into CommonJS by esbuild first, with
// an inline source map, so stacks name the lines of the file as written.

// ErrModule marks a file module that cannot be resolved or is outside the root.
var ErrModule = errors.New("module")

var esmSyntax = regexp.MustCompile(`(?m)^[ \t]*(?:import[ \t\n{*"'A-Za-z_$]|export[ \t\n{*])`)

// IsTypeScript reports whether a file name is TypeScript.
func IsTypeScript(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".ts" || ext == ".mts" || ext == ".cts"
}

// needsTransform reports whether src must go through esbuild before goja runs it.
func needsTransform(name, src string) bool {
	return IsTypeScript(name) || esmSyntax.MatchString(src)
}

// Transform strips TypeScript types and turns ES module syntax into CommonJS, with an inline
// source map naming name. Errors are SyntaxErrors at the line and column of the file.
func Transform(name, src string) (string, error) {
	loader := api.LoaderJS
	if IsTypeScript(name) {
		loader = api.LoaderTS
	}
	res := api.Transform(src, api.TransformOptions{
		Loader:     loader,
		Format:     api.FormatCommonJS,
		Target:     api.ES2020,
		Sourcemap:  api.SourceMapInline,
		Sourcefile: filepath.Base(name), // goja resolves the map's sources next to name
		LogLevel:   api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		m := res.Errors[0]
		se := &stdlib.ScriptError{Message: "SyntaxError: " + m.Text, File: name}
		if m.Location != nil {
			se.Line = m.Location.Line
			se.Message = fmt.Sprintf("SyntaxError: %s (column %d)", m.Text, m.Location.Column+1)
		}
		return "", se
	}
	return string(res.Code), nil
}

// moduleWrapper opens the function a module runs in; it stays on the module's first line.
const moduleWrapper = "(function (exports, require, module, __filename, __dirname) {"

// runModule compiles and runs one file as a module (its own scope, exports) and returns
// module.exports. dir is the directory its relative requires start from.
func (v *VM) runModule(name, dir, src string) (goja.Value, error) {
	code := src
	if needsTransform(name, src) {
		var err error
		if code, err = Transform(name, src); err != nil {
			return nil, err
		}
	}
	// The source map comment must stay the last line for goja to find it.
	body, smap := code, ""
	if i := strings.LastIndex(code, "\n//# sourceMappingURL="); i >= 0 {
		body, smap = code[:i], code[i:]
	}
	prg, err := compileScript(name, moduleWrapper+body+"\n})"+smap)
	if err != nil {
		return nil, err
	}
	fnVal, err := v.rt.RunProgram(prg)
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(fnVal)
	if !ok {
		return nil, fmt.Errorf("%s: %w: the module did not compile to a function", name, ErrModule)
	}
	module := v.rt.NewObject()
	exports := v.rt.NewObject()
	_ = module.Set("exports", exports)
	v.loading[name] = module
	defer delete(v.loading, name)
	if _, err := fn(goja.Undefined(), exports, v.rt.ToValue(v.requireFrom(dir)), module, v.rt.ToValue(name), v.rt.ToValue(dir)); err != nil {
		return nil, err
	}
	return module.Get("exports"), nil
}

// requireFrom is the require function of a module in dir.
func (v *VM) requireFrom(dir string) func(goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) goja.Value {
		return v.requireIn(dir, call.Argument(0).String())
	}
}

func isRelative(spec string) bool {
	return strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../")
}

// requireIn resolves spec for a module in dir: a standard module by name, or a file.
func (v *VM) requireIn(dir, spec string) goja.Value {
	if !isRelative(spec) {
		return v.requireStd(spec)
	}
	name, abs, err := v.resolve(dir, spec)
	if err != nil {
		panic(v.throw(err))
	}
	if val, ok := v.files[abs]; ok {
		return val
	}
	if m, ok := v.loading[name]; ok { // a cycle: what it exported so far
		return m.Get("exports")
	}
	src, err := os.ReadFile(abs)
	if err != nil {
		panic(v.throw(fmt.Errorf("require(%q): %w", spec, err)))
	}
	val, err := v.runModule(name, filepath.Dir(name), string(src))
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			panic(ex) // the module's own error, with its stack
		}
		panic(v.throw(err))
	}
	v.files[abs] = val
	return val
}

// resolve finds the file spec names from dir (a path as scripts name it, relative to the
// working directory like the main script's): spec itself, then with .js, .ts, /index.js and
// /index.ts. It must lie inside the root once links are followed.
func (v *VM) resolve(dir, spec string) (name, abs string, err error) {
	if v.opts.Root == "" {
		return "", "", fmt.Errorf("require(%q): %w: file modules are not available here", spec, ErrModule)
	}
	root, err := filepath.EvalSymlinks(v.opts.Root)
	if err == nil {
		root, err = filepath.Abs(root)
	}
	if err != nil {
		return "", "", fmt.Errorf("require(%q): %w: %v", spec, ErrModule, err)
	}
	base := filepath.Join(dir, filepath.FromSlash(spec))
	for _, cand := range []string{base, base + ".js", base + ".ts", filepath.Join(base, "index.js"), filepath.Join(base, "index.ts")} {
		st, err := os.Stat(cand)
		if err != nil || st.IsDir() {
			continue
		}
		real, err := filepath.EvalSymlinks(cand)
		if err != nil {
			continue
		}
		if real, err = filepath.Abs(real); err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", "", fmt.Errorf("require(%q): %w: %s is outside the script's directory %s", spec, ErrModule, cand, v.opts.Root)
		}
		return cand, real, nil
	}
	return "", "", fmt.Errorf("require(%q): %w: no file %s(.js|.ts|/index.js|/index.ts)", spec, ErrModule, base)
}
