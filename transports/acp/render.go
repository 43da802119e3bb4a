package acp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/tool/builtin"
)

// maxToolText caps text shown in a tool call's content; the model still sees the full result.
const maxToolText = 8 * 1024

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && (s[cut]&0xC0) == 0x80 { // keep UTF-8 whole
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… (%d more bytes)", len(s)-cut)
}

// toolKind maps a Hermes tool to the ACP kind clients use for icons and grouping.
func toolKind(name string) sdk.ToolKind {
	switch name {
	case "read_file":
		return sdk.ToolKindRead
	case "write_file", "patch":
		return sdk.ToolKindEdit
	case "search_files":
		return sdk.ToolKindSearch
	case "terminal", "process":
		return sdk.ToolKindExecute
	case "web_fetch", "web_search":
		return sdk.ToolKindFetch
	case "delegate_task", "clarify", "todo":
		return sdk.ToolKindThink
	}
	return sdk.ToolKindOther
}

func argMap(raw json.RawMessage) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// toolTitle is the one line a client shows for a call.
func toolTitle(name string, args map[string]any) string {
	switch name {
	case "terminal":
		if c := str(args, "command"); c != "" {
			return truncate(c, 200)
		}
	case "read_file", "write_file", "patch":
		if p := str(args, "path"); p != "" {
			return name + " " + p
		}
	case "search_files":
		if p := str(args, "pattern"); p != "" {
			return "search " + p
		}
	case "todo":
		if items, ok := args["todos"].([]any); ok {
			if merge, _ := args["merge"].(bool); merge {
				return fmt.Sprintf("update plan (%d items)", len(items))
			}
			return fmt.Sprintf("plan (%d items)", len(items))
		}
	}
	return name
}

// planUpdate turns a todo result (the whole list) into a plan update, which replaces the
// client's plan. ACP plans have no cancelled status: a cancelled item shows as completed
// with a "[cancelled]" prefix. ok is false when content is not a todo list.
func planUpdate(content string) (u sdk.SessionUpdate, ok bool) {
	var l builtin.TodoList
	if json.Unmarshal([]byte(content), &l) != nil || l.Todos == nil {
		return u, false
	}
	entries := make([]sdk.PlanEntry, 0, len(l.Todos))
	for _, it := range l.Todos {
		e := sdk.PlanEntry{Content: it.Content, Priority: sdk.PlanEntryPriorityMedium, Status: sdk.PlanEntryStatusPending}
		switch it.Priority {
		case builtin.TodoHigh:
			e.Priority = sdk.PlanEntryPriorityHigh
		case builtin.TodoLow:
			e.Priority = sdk.PlanEntryPriorityLow
		}
		switch it.Status {
		case builtin.TodoInProgress:
			e.Status = sdk.PlanEntryStatusInProgress
		case builtin.TodoCompleted:
			e.Status = sdk.PlanEntryStatusCompleted
		case builtin.TodoCancelled:
			e.Status, e.Content = sdk.PlanEntryStatusCompleted, "[cancelled] "+it.Content
		}
		entries = append(entries, e)
	}
	return sdk.SessionUpdate{Plan: &sdk.SessionUpdatePlan{Entries: entries, SessionUpdate: "plan"}}, true
}

// absPath resolves a tool path against the session directory; ACP locations are absolute.
func absPath(cwd, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(cwd, p)
}

// startContent is what a client shows while the call runs.
func startContent(name string, args map[string]any) []sdk.ToolCallContent {
	if name == "terminal" {
		if c := str(args, "command"); c != "" {
			return []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock("$ " + truncate(c, maxToolText)))}
		}
	}
	return nil
}

// resultContent renders a finished call: edits as diffs, everything else as bounded text.
func resultContent(name, cwd string, args map[string]any, content string, meta map[string]any) []sdk.ToolCallContent {
	if name == "write_file" || name == "patch" {
		path, _ := meta["path"].(string)
		if path == "" {
			path = str(args, "path")
		}
		if d, _ := meta["diff"].(string); d != "" && path != "" {
			oldText, newText := splitDiff(d)
			if created, _ := meta["created"].(bool); created {
				return []sdk.ToolCallContent{sdk.ToolDiffContent(absPath(cwd, path), newText)}
			}
			return []sdk.ToolCallContent{sdk.ToolDiffContent(absPath(cwd, path), newText, oldText)}
		}
	}
	if content == "" {
		return nil
	}
	text := truncate(content, maxToolText)
	if name == "terminal" {
		text = "```\n" + text + "\n```"
	}
	return []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(text))}
}

// splitDiff turns a unified diff into the old and new text of its hunks, the form ACP diff
// content takes. Hunks are separated by a blank line; headers are dropped.
func splitDiff(d string) (oldText, newText string) {
	var o, n strings.Builder
	hunks := 0
	for line := range strings.SplitSeq(d, "\n") {
		switch {
		case strings.HasPrefix(line, "---"), strings.HasPrefix(line, "+++"), strings.HasPrefix(line, `\`):
		case strings.HasPrefix(line, "@@"):
			if hunks > 0 {
				o.WriteString("\n")
				n.WriteString("\n")
			}
			hunks++
		case strings.HasPrefix(line, "-"):
			o.WriteString(line[1:] + "\n")
		case strings.HasPrefix(line, "+"):
			n.WriteString(line[1:] + "\n")
		case strings.HasPrefix(line, " "):
			o.WriteString(line[1:] + "\n")
			n.WriteString(line[1:] + "\n")
		}
	}
	return o.String(), n.String()
}

// maxImageBytes bounds one decoded image block.
const maxImageBytes = 10 << 20

// promptInput is a prompt's blocks flattened for the engine.
type promptInput struct {
	text   string
	images []string // files under dir; they stay, since the transcript row refers to them
	dir    string
}

// cleanup removes the images of a prompt that never reached the engine.
func (p *promptInput) cleanup() {
	for _, f := range p.images {
		if strings.HasPrefix(f, p.dir+string(filepath.Separator)) {
			os.Remove(f)
		}
	}
}

// flatten converts ACP content blocks into prompt text and image files. Resource links and
// embedded resources become tagged context the model can read; audio is refused because the
// agent does not advertise it.
func flatten(blocks []sdk.ContentBlock, imageDir string) (*promptInput, error) {
	p := &promptInput{dir: imageDir}
	var b strings.Builder
	add := func(s string) {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(s)
	}
	for i, blk := range blocks {
		switch {
		case blk.Text != nil:
			add(blk.Text.Text)
		case blk.ResourceLink != nil:
			add(fmt.Sprintf("[resource: %s](%s)", blk.ResourceLink.Name, blk.ResourceLink.Uri))
		case blk.Resource != nil:
			r := blk.Resource.Resource
			switch {
			case r.TextResourceContents != nil:
				add(fmt.Sprintf("<context uri=%q>\n%s\n</context>", r.TextResourceContents.Uri, r.TextResourceContents.Text))
			case r.BlobResourceContents != nil:
				add(fmt.Sprintf("[binary resource: %s]", r.BlobResourceContents.Uri))
			}
		case blk.Image != nil:
			f, err := p.saveImage(i, blk.Image)
			if err != nil {
				p.cleanup()
				return nil, err
			}
			p.images = append(p.images, f)
		case blk.Audio != nil:
			p.cleanup()
			return nil, fmt.Errorf("block %d: audio prompts are not supported", i)
		}
	}
	p.text = b.String()
	if strings.TrimSpace(p.text) == "" && len(p.images) > 0 {
		p.text = "(image)"
	}
	return p, nil
}

func (p *promptInput) saveImage(i int, img *sdk.ContentBlockImage) (string, error) {
	if img.Data == "" && img.Uri != nil { // a local file by reference
		if u, err := url.Parse(*img.Uri); err == nil && u.Scheme == "file" && filepath.IsAbs(u.Path) {
			return u.Path, nil
		}
		return "", fmt.Errorf("block %d: image has no data and no file:// uri", i)
	}
	ext := ".png"
	switch img.MimeType {
	case "image/png":
	case "image/jpeg":
		ext = ".jpg"
	case "image/gif":
		ext = ".gif"
	case "image/webp":
		ext = ".webp"
	default:
		return "", fmt.Errorf("block %d: unsupported image type %q", i, img.MimeType)
	}
	if base64.StdEncoding.DecodedLen(len(img.Data)) > maxImageBytes {
		return "", fmt.Errorf("block %d: image larger than %d bytes", i, maxImageBytes)
	}
	data, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil {
		return "", fmt.Errorf("block %d: image data is not base64: %w", i, err)
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(p.dir, "image-*"+ext)
	if err != nil {
		return "", err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", werr
	}
	return f.Name(), nil
}

// toolFailed reports whether a finished call is shown failed: an error result, or a terminal
// command that exited non-zero. The engine keeps the latter a normal result (its output and
// code are what the model reads), and states the code in meta["exit_code"] and on the last
// line of the content ("[exit code N]"), which is all a replayed row keeps.
func toolFailed(name string, isError bool, content string, meta map[string]any) bool {
	if isError {
		return true
	}
	if name != "terminal" {
		return false
	}
	switch c := meta["exit_code"].(type) {
	case int:
		return c != 0
	case int64:
		return c != 0
	case float64:
		return c != 0
	}
	last := strings.TrimRight(content, "\n")
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	if !strings.HasPrefix(last, "[") || !strings.HasSuffix(last, "]") {
		return false
	}
	_, code, ok := strings.Cut(last, "exit code ")
	code = strings.TrimRight(code, ")]")
	return ok && code != "0" && code != ""
}

// editDiffs renders the edits of an edit review (the approval payload's "edits") as diff
// content: path, old text (absent for a new file) and new text.
func editDiffs(v any) []sdk.ToolCallContent {
	list, _ := v.([]map[string]any)
	out := make([]sdk.ToolCallContent, 0, len(list))
	for _, e := range list {
		path, _ := e["path"].(string)
		oldText, _ := e["old_text"].(string)
		newText, _ := e["new_text"].(string)
		if created, _ := e["created"].(bool); created {
			out = append(out, sdk.ToolDiffContent(path, newText))
			continue
		}
		out = append(out, sdk.ToolDiffContent(path, newText, oldText))
	}
	return out
}
