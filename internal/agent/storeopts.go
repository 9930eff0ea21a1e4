package agent

import (
	"fmt"
	"io"
	"time"

	"github.com/weir-dev/weir/internal/store"
)

// StoreOptions are the store flags of capture and collect, checked by
// Config.
type StoreOptions struct {
	Dir       string // "off" or "": no store
	Retention time.Duration
	MaxSize   int64
	Writeout  time.Duration
	Precision time.Duration
	Mode      string    // private or group
	Log       io.Writer // the store's messages, each as "store: ..."
}

// Config is the store's configuration, nil when it is off; mistakes are
// usage errors.
func (o *StoreOptions) Config() (*store.Config, error) {
	if o.Dir == "off" || o.Dir == "" {
		return nil, nil
	}
	if o.Writeout <= 0 {
		return nil, usagef("--writeout must be positive")
	}
	if o.Precision <= 0 || o.Precision > time.Hour {
		return nil, usagef("--time-precision must be within 1ns..1h")
	}
	var mode store.Mode
	switch o.Mode {
	case "private":
	case "group":
		mode = store.ModeGroup
	default:
		return nil, usagef("--store-mode %q: use private or group", o.Mode)
	}
	log := o.Log
	return &store.Config{Dir: o.Dir, Writeout: o.Writeout, Mode: mode,
		Retention: o.Retention, MaxSize: o.MaxSize, TimePrecision: o.Precision,
		Log: func(msg string) { fmt.Fprintf(log, "store: %s\n", msg) }}, nil
}
