//go:build !unix

package builtin

import "errors"

func mkfifo(string) error { return errors.New("not supported") }
