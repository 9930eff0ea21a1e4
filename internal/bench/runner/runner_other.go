//go:build !linux

package runner

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/weir-dev/weir/internal/bench/result"
)

// errNeedsLinux is what weir bench run says off Linux.
var errNeedsLinux = fmt.Errorf("weir bench run needs Linux: its test hosts are network namespaces joined by veth pairs (this is %s)", runtime.GOOS)

// Run needs Linux.
func Run(context.Context, Config) (*result.Run, error) { return nil, errNeedsLinux }

// Serve needs Linux.
func Serve(io.Reader, io.Writer) error { return errNeedsLinux }

// Client needs Linux.
func Client(io.Reader, io.Writer) error { return errNeedsLinux }
