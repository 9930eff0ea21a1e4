// Command mksample writes the deterministic sample capture that `make run`
// replays: craft's ground-truth scenario (324 flows over six interfaces and
// link types) as one pcapng file.
//
//	go run ./internal/tools/mksample -o build/sample.pcapng
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/packet"
	"github.com/weir-dev/weir/internal/source"
	"github.com/weir-dev/weir/internal/source/pcap"
	"github.com/weir-dev/weir/internal/source/synthetic"
)

func main() {
	out := flag.String("o", "build/sample.pcapng", "output `file`")
	seed := flag.Int64("seed", 1, "scenario seed")
	flows := flag.Int("flows", 0, "instead of the scenario, write `n` synthetic flows (classic pcap, Ethernet, 96-byte snap length)")
	packets := flag.Int("packets", 1000000, "with -flows: number of packets")
	flag.Parse()
	var err error
	if *flows > 0 {
		err = writeSynthetic(*out, *flows, *packets, *seed)
	} else {
		err = write(*out, *seed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mksample:", err)
		os.Exit(1)
	}
}

// writeSynthetic writes the synthetic source's frames as a classic pcap,
// the input for side-by-side replay benchmarks with peer tools.
func writeSynthetic(path string, flows, packets int, seed int64) error {
	src, err := synthetic.New(synthetic.Config{Flows: flows, Packets: packets, IPv6Share: 0.5, UDPShare: 0.5,
		MaxPayload: 1400, Seed: seed})
	if err != nil {
		return err
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(path + ".tmp") }() // gone already after the rename
	w, err := pcap.NewWriter(f, packet.LinkEthernet, synthetic.DefaultSnap)
	if err != nil {
		return err
	}
	var fr source.Frame
	for {
		if err := src.Next(&fr); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if err := w.WritePacket(fr.Time, fr.WireLen, fr.Data); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mksample: %s: %d packets, %d flows\n", path, packets, flows)
	return os.Rename(path+".tmp", path)
}

// write renders the scenario into path atomically (temp file + rename).
func write(path string, seed int64) error {
	frames, truth := craft.Scenario(seed)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }() // gone already after the rename
	bw := bufio.NewWriter(f)
	w, err := pcap.NewNgWriter(bw)
	if err != nil {
		return err
	}
	ids := map[string]int{}
	for _, ifc := range craft.ScenarioIfaces {
		id, err := w.AddInterface(ifc.Name, ifc.Link, 65535)
		if err != nil {
			return err
		}
		ids[ifc.Name] = id
	}
	for _, fr := range frames {
		if err := w.WritePacket(ids[fr.Iface], fr.Time, fr.WireLen, fr.Data); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mksample: %s: %d frames, %d flows\n", path, len(frames), len(truth))
	return os.Rename(tmp, path)
}
