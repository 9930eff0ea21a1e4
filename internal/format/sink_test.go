package format

import "github.com/weir-dev/weir/internal/sink"

// JSON lines and the table are sinks as they are (the CLI writes to them
// like to any other sink); this fails to compile if either stops being one.
var (
	_ sink.Sink = (*JSON)(nil)
	_ sink.Sink = (*Table)(nil)
)
