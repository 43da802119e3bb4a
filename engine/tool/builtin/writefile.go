package builtin

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// WriteFile is the `write_file` tool: it creates or replaces a whole file, atomically.
type WriteFile struct{}

var writeFileSchema = object([]string{"path", "content"}, map[string]*schema{
	"path":    {Type: "string", Description: "File to write, relative to the working directory. Missing parent directories are created."},
	"content": {Type: "string", Description: "The complete new content of the file."},
})

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Spec describes the tool to the model.
func (WriteFile) Spec() model.ToolSpec {
	return toolSpec("write_file",
		"Create a file or replace its entire content. For changing part of an existing file use patch instead: "+
			"it is shorter and cannot drop content by accident. Replacing keeps the file's permissions.",
		writeFileSchema)
}

// Call writes the file.
func (WriteFile) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	var a writeFileArgs
	if err := decodeArgs("write_file", writeFileSchema, c.Args, &a); err != nil {
		return argsResult(err), nil
	}
	path, realCwd, err := resolve(env, a.Path)
	if err != nil {
		return tool.Errorf("%v", err), nil
	}
	shown := displayPath(realCwd, path)
	old, err := readForEdit(ctx, env, path, shown)
	// Overwriting a binary or huge file is allowed; it just has no meaningful diff.
	diffable := err == nil
	if err != nil && !errors.Is(err, errBinary) && !errors.Is(err, errTooLarge) {
		return tool.Errorf("cannot write %s: %v", shown, err), nil
	}
	if env != nil && env.ReviewEdits != nil {
		if err := env.ReviewEdits(ctx, []tool.Edit{{Path: path, OldText: old.content, NewText: a.Content, Created: !old.exists}}); err != nil {
			return tool.Errorf("%v; %s was not modified", err, shown), nil
		}
	}
	if err := writeText(ctx, env, path, shown, a.Content, old.mode); err != nil {
		return tool.Errorf("cannot write %s: %v", shown, err), nil
	}

	verb := "Created"
	if old.exists {
		verb = "Wrote"
	}
	meta := map[string]any{"path": shown, "created": !old.exists, "bytes": len(a.Content)}
	if diffable {
		d, omitted := metaDiff(shown, old.content, a.Content, old.exists, true)
		meta["diff"] = d
		if omitted {
			meta["diff_omitted"] = true
		}
	} else {
		meta["diff_omitted"] = true
	}
	return tool.Result{
		Content: fmt.Sprintf("%s %s (%d bytes, %d lines).", verb, shown, len(a.Content), len(splitLines(a.Content))),
		Meta:    meta,
	}, nil
}
