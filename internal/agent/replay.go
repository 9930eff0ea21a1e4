package agent

import (
	"errors"
	"os"

	"github.com/weir-dev/weir/internal/meter"
	"github.com/weir-dev/weir/internal/source/pcap"
	"github.com/weir-dev/weir/internal/source/synthetic"
)

// Replay is the meter over capture files or synthetic traffic.
type Replay struct {
	Meter     meter.Config
	Files     []string          // pcap and pcapng files in order ("-": standard input); or
	Synthetic *synthetic.Config // generated traffic instead
	Logf      func(format string, a ...any)
}

// Open opens the files or the generator, and the meter over them.
func (r Replay) Open() (Producer, error) {
	if r.Synthetic != nil {
		src, err := synthetic.New(*r.Synthetic)
		if err != nil {
			return nil, usagef("--synthetic: %v", err)
		}
		m, err := meter.NewReplay(meter.ReplayConfig{Meter: r.Meter, Source: src})
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	files, err := pcap.OpenFiles(r.Files, os.Stdin)
	if errors.Is(err, pcap.ErrStdinTwice) {
		return nil, usagef("%v", err)
	} else if err != nil {
		return nil, err
	}
	m, err := meter.NewReplay(meter.ReplayConfig{Meter: r.Meter, Source: files, Logf: r.Logf})
	if err != nil {
		files.Close()
		return nil, usagef("%v", err)
	}
	return m, nil
}
