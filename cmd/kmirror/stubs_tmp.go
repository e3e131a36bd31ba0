package main

import (
	"context"
	"errors"
	"io"
)

func devCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not built yet")
}

func mirrorsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int { return 2 }
