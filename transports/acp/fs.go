package acp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// clientFS lends a session the editor's file system (fs/read_text_file, fs/write_text_file)
// for the operations the client advertised, so reads see unsaved buffers and the editor
// reviews writes. What it does not advertise answers errors.ErrUnsupported and the file
// tools use the disk. Paths arrive absolute and already confined by the tools.
type clientFS struct {
	a           *agent
	id          string
	read, write bool
}

func (f *clientFS) ReadTextFile(ctx context.Context, path string) (string, error) {
	if !f.read {
		return "", errors.ErrUnsupported
	}
	ctx, cancel := f.a.clientCtx(ctx, f.a.o.FSTimeout)
	defer cancel()
	r, err := f.a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: sdk.SessionId(f.id), Path: path})
	if err != nil {
		return "", clientError(ctx, err)
	}
	return r.Content, nil
}

func (f *clientFS) WriteTextFile(ctx context.Context, path, content string) error {
	if !f.write {
		return errors.ErrUnsupported
	}
	ctx, cancel := f.a.clientCtx(ctx, f.a.o.FSTimeout)
	defer cancel()
	if _, err := f.a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: sdk.SessionId(f.id), Path: path, Content: content}); err != nil {
		return clientError(ctx, err)
	}
	return nil
}

// clientError words a failed client round trip for the model: the client's own message when
// it answered with an error, else why no answer came.
// clientCtx bounds a request to the client by timeout and by the client's input: once it
// has closed, no answer can come.
func (a *agent) clientCtx(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	stop := context.AfterFunc(a.input, cancel)
	return ctx, func() { stop(); cancel() }
}

func clientError(ctx context.Context, err error) error {
	var re *sdk.RequestError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errors.New("the client did not answer in time")
	case ctx.Err() != nil:
		return errors.New("the request was cancelled")
	case errors.As(err, &re):
		msg := re.Message
		if m, ok := re.Data.(map[string]any); ok {
			for _, k := range []string{"error", "message", "details"} {
				if s, ok := m[k].(string); ok && s != "" {
					msg += ": " + s
					break
				}
			}
		}
		return fmt.Errorf("the client answered %d %s", re.Code, msg)
	}
	return err
}
