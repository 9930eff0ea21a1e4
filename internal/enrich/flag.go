package enrich

import (
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/termsafe"
)

// FileFlag is --enrich: it loads the inventory as the flag is parsed, so
// that a bad file is a command-line error that names the file and line.
// Reload messages go to Log (nil: os.Stderr) as "weir: ...", one line
// whatever the file held.
type FileFlag struct {
	Path    string
	Watched *Watched // nil until Set
	Log     io.Writer
}

// String is the file's path.
func (f *FileFlag) String() string {
	if f == nil {
		return ""
	}
	return f.Path
}

// Set loads the inventory at path (LoadWatched).
func (f *FileFlag) Set(path string) error {
	live, err := LoadWatched(path, f.logf)
	if err != nil {
		return err
	}
	f.Path, f.Watched = path, live
	return nil
}

func (f *FileFlag) logf(format string, a ...any) {
	w := f.Log
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "weir: %s\n", termsafe.Message(fmt.Sprintf(format, a...)))
}
