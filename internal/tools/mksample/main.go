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
	"os"

	"github.com/weir-dev/weir/internal/craft"
	"github.com/weir-dev/weir/internal/source/pcap"
)

func main() {
	out := flag.String("o", "build/sample.pcapng", "output `file`")
	seed := flag.Int64("seed", 1, "scenario seed")
	flag.Parse()
	if err := write(*out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "mksample:", err)
		os.Exit(1)
	}
}

// write renders the scenario into path atomically (temp file + rename).
func write(path string, seed int64) error {
	frames, truth := craft.Scenario(seed)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
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
