package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// storeCheck runs weir store check on dir: its exit status, intact
// records, damaged blocks and the records it says were lost.
type checkOut struct {
	code                                int
	intact, damaged, lost, badIdx, tail int64
	problems                            int64
	text                                string
}

func storeCheck(dir string, repair bool) checkOut {
	args := []string{"store", "check", "--data-dir", dir}
	if repair {
		args = append(args, "--repair")
	}
	cmd := exec.Command(weirBin, args...)
	out, _ := cmd.CombinedOutput()
	c := checkOut{code: cmd.ProcessState.ExitCode(), text: string(out)}
	notePanic(args, c.text)
	// "N partitions: B blocks intact (R records); D blocks damaged (L records lost"
	if i := strings.Index(c.text, "blocks intact ("); i >= 0 {
		c.intact, _ = statNumber(c.text[i:], "blocks intact (")
	}
	if i := strings.Index(c.text, "; "); i >= 0 {
		if n, ok := statNumber(c.text[i:], "; "); ok && strings.Contains(c.text[i:], "blocks damaged") {
			c.damaged = n
		}
	}
	c.lost, _ = statNumber(c.text, "blocks damaged (")
	if i := strings.Index(c.text, "blocks damaged ("); i >= 0 {
		c.lost, _ = statNumber(c.text[i:], "blocks damaged (")
	}
	c.badIdx, _ = statNumber(c.text, "records lost), ")
	if i := strings.Index(c.text, "indexes damaged, "); i >= 0 {
		c.tail, _ = statNumber(c.text[i:], "indexes damaged, ")
		c.problems, _ = statNumber(c.text[i:], "last block; ")
	}
	return c
}

// notePanic records a weir run directly (not by start) that panicked.
func notePanic(args []string, stderr string) {
	if strings.Contains(stderr, "panic: ") || strings.Contains(stderr, "fatal error: ") {
		panicsMu.Lock()
		panics = append(panics, fmt.Sprintf("weir %s panicked:\n%s", strings.Join(args, " "), tail(stderr)))
		panicsMu.Unlock()
	}
}

// queryRows sums the flows weir query reads from dir over all time, and
// returns its stderr.
func queryRows(dir string) (int64, string, error) {
	cmd := exec.Command(weirBin, "query", "--data-dir", dir, "-f", "1970-01-01", "-t", "2262-01-01", "-n", "0", "-o", "csv", "iface")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	notePanic(cmd.Args[1:], stderr.String())
	if err != nil {
		return 0, stderr.String(), fmt.Errorf("weir query: %v: %s", err, tail(stderr.String()))
	}
	var n int64
	for i, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, ",")
		if i == 0 || len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, stderr.String(), fmt.Errorf("weir query: line %q", l)
		}
		n += v
	}
	return n, stderr.String(), nil
}

// caseKill9: a collector writing to the store (a writeout every 100 ms)
// is killed with SIGKILL at a random moment, 20 times on the same data
// directory. After each kill weir store check must find no damage, the
// committed rows never decrease, and weir query reads every one of them.
// What was in flight (buffered for the next writeout, in the socket) is
// lost by design and not counted by the killed process.
func caseKill9(r *result) {
	dir := filepath.Join(workDir, "kill9", "data")
	rng := mrand.New(mrand.NewPCG(9, 9))
	var committed int64
	tails := 0
	end := time.Now().Add(90 * time.Second)
	for try := 0; try < 20 && time.Now().Before(end); try++ {
		r.tries++
		metricsAddr := freePort()
		p, err := start(filepath.Join(workDir, "kill9", fmt.Sprint(try)), "collect", "--listen", "udp://127.0.0.1:0",
			"--data-dir", dir, "--writeout", "100ms", "-o", "none", "--metrics-addr", metricsAddr)
		if err != nil {
			r.failf("try %d: %v", try, err)
			continue
		}
		addrs, err := p.waitListening(1, 10*time.Second)
		if err != nil {
			_ = p.cmd.Process.Kill() // it may have exited already
			p.wait(5 * time.Second)
			r.failf("try %d: %v", try, err)
			continue
		}
		var sent atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // an exporter sending 50-record batches every 5 ms until the kill
			defer wg.Done()
			u, err := udpFrom("127.0.0.1", addrOf(addrs[0]))
			if err != nil {
				return
			}
			defer u.Close()
			msgs := exportMsgs(goodRecords(2000, uint64(try), "eth0"))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := msgs[i%len(msgs)]
				if _, err := u.Write(m.b); err == nil {
					sent.Add(int64(m.n))
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		time.Sleep(time.Duration(200+rng.IntN(1000)) * time.Millisecond)
		_ = p.cmd.Process.Signal(syscall.SIGKILL) // the point: a kill at any moment
		close(stop)
		wg.Wait()
		p.wait(5 * time.Second)
		c := storeCheck(dir, false)
		rows, qerr, err := queryRows(dir)
		survived := true
		switch {
		case c.code != 0 && c.tail > 0 && c.problems == c.tail && c.damaged == 0 && c.badIdx == 0:
			tails++ // the write the kill interrupted: no committed record touched; the next writer cuts it
			fallthrough
		case c.code == 0 && c.damaged == 0 && c.badIdx == 0:
			switch {
			case c.intact < committed:
				r.failf("try %d: %d committed records before the kill, %d after", try, committed, c.intact)
				survived = false
			case err != nil || rows != c.intact:
				r.failf("try %d: weir query read %d of %d committed records (%v) %s", try, rows, c.intact, err, tail(qerr))
				survived = false
			}
		default:
			r.failf("try %d: store check exit %d after the kill:\n%s", try, c.code, tail(c.text))
			survived = false
		}
		gained := c.intact - committed
		lost := sent.Load() - gained
		vlogf("   try %d: sent %d, committed %d (+%d), in flight at the kill %d", try, sent.Load(), c.intact, gained, lost)
		r.lost += max(lost, 0)
		committed = max(committed, c.intact)
		if survived {
			r.ok++
		}
	}
	r.note = fmt.Sprintf("%d records committed, all readable, no damage; %d kills left an interrupted write after the last block (said by store check, cut by the next writer); lost = in flight at the kill (unwritten writeout, socket), which no killed process can count", committed, tails)
}

// exportMsg is an encoded IPFIX message and its record count.
type exportMsg struct {
	b []byte
	n int
}

// caseDiskFull: the data directory on a 256 KiB tmpfs. A file replay must
// write every record to the JSON output and the IPFIX export and count
// every record the store could not write; a collector whose store is full
// must exit within 5 s of SIGTERM with the same accounting. Root only.
func caseDiskFull(r *result) {
	if os.Geteuid() != 0 {
		r.skipped = "needs root to mount a small tmpfs (run as root: sudo make chaos)"
		return
	}
	mnt := filepath.Join(workDir, "diskfull", "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		fatal(err)
	}
	if err := mountTmpfs(mnt, "size=256k,mode=0700"); err != nil {
		r.skipped = "mount tmpfs: " + err.Error()
		return
	}
	cleanMu.Lock()
	mounts = append(mounts, mnt)
	cleanMu.Unlock()
	defer func() { _ = unmountLazy(mnt) }() // best effort; main unmounts again at exit
	// 1. replay
	r.tries++
	p, err := start(filepath.Join(workDir, "diskfull", "replay"), "capture", "--synthetic", "flows=100000,packets=200000",
		"--data-dir", filepath.Join(mnt, "replay"), "-o", "json", "--stats", "--writeout", "200ms")
	if err != nil {
		r.failf("replay: %v", err)
		return
	}
	ok := true
	if !p.wait(120 * time.Second) {
		r.failf("replay: still running after 120 s (killed)")
		ok = false
	}
	stderr := p.errText()
	records, _ := statNumber(stderr, "records     ")
	jsonLines := int64(strings.Count(p.outText(), "\n"))
	written, _ := statNumber(storeLine(stderr), "store: ")
	dropped := storeDropped(stderr)
	switch {
	case records == 0 || jsonLines != records:
		r.failf("replay: %d records, %d JSON lines (the full store must not throttle the output)", records, jsonLines)
		ok = false
	case !strings.Contains(stderr, "no space left on device"):
		r.failf("replay: stderr does not say the disk is full:\n%s", tail(stderr))
		ok = false
	}
	lost := records - written
	r.lost += lost
	counted := dropped == lost
	if !counted {
		r.failf("replay: %d records, %d stored, %d counted dropped/lost:\n%s", records, written, dropped, tail(stderr))
	}
	// A write the full disk cut short leaves bytes after the last block
	// (store check says so); the next writer to open the file cuts them.
	if c := storeCheck(filepath.Join(mnt, "replay"), false); c.intact != written || c.damaged != 0 || c.badIdx != 0 {
		r.failf("replay: the store says %d written, store check finds %d:\n%s", written, c.intact, tail(c.text))
		ok = false
	}
	if ok {
		r.ok++
	}
	vlogf("   replay: %d records, %d JSON lines, %d stored, %d dropped", records, jsonLines, written, dropped)

	// 2. a collector, stopped with SIGTERM while its store is full
	r.tries++
	_ = os.RemoveAll(filepath.Join(mnt, "replay")) // best effort: the next case needs the space, a failure shows there
	okC, lostC, countedC, collectNote := diskFullCollect(r, filepath.Join(mnt, "collect"))
	r.lost += lostC
	if okC {
		r.ok++
	}
	switch {
	case r.lost == 0:
		r.counted = "n/a"
	case counted && countedC:
		r.counted = "yes"
	default:
		r.counted = "no"
	}
	r.note = fmt.Sprintf("256 KiB tmpfs; replay: %d records, %d JSON lines, %d stored, %d counted dropped; %s", records, jsonLines, written, dropped, collectNote)
}

// storeDropped is what the --stats output counts as not written by the
// store: its dropped records plus what its queue dropped or lost.
func storeDropped(stderr string) int64 {
	n := numberBefore(storeLine(stderr), " records dropped") + numberBefore(storeLine(stderr), " records still buffered at exit")
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "sink queue  store: ") {
			n += numberBefore(l, " dropped") + numberBefore(l, " lost")
		}
	}
	return n
}

// numberBefore is the number (commas allowed) right before word in line.
func numberBefore(line, word string) int64 {
	j := strings.Index(line, word)
	if j < 0 {
		return 0
	}
	k := j
	for k > 0 && (line[k-1] >= '0' && line[k-1] <= '9' || line[k-1] == ',') {
		k--
	}
	v, _ := strconv.ParseInt(strings.ReplaceAll(line[k:j], ",", ""), 10, 64)
	return v
}

// storeLine is the store's line of --stats ("store: N records in …").
func storeLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "store: ") && strings.Contains(l, " records in ") {
			return l
		}
	}
	return ""
}

// diskFullCollect runs a collector writing to a full store, sends it
// 40,000 records and stops it with SIGTERM.
func diskFullCollect(r *result, dir string) (ok bool, lost int64, counted bool, note string) {
	metricsAddr := freePort()
	p, err := start(filepath.Join(workDir, "diskfull", "collect"), "collect", "--listen", "udp://127.0.0.1:0", "--data-dir", dir,
		"--writeout", "200ms", "-o", "none", "--stats", "--metrics-addr", metricsAddr)
	if err != nil {
		r.failf("collect: %v", err)
		return false, 0, false, ""
	}
	addrs, err := p.waitListening(1, 10*time.Second)
	if err != nil {
		p.stop(syscall.SIGKILL, 5*time.Second)
		r.failf("collect: %v", err)
		return false, 0, false, ""
	}
	recs := goodRecords(40000, 5, "eth0")
	if _, err := export("ipfix+udp://"+addrOf(addrs[0]), nil, recs, 1); err != nil {
		r.failf("collect: export: %v", err)
	}
	m, _ := waitMetric(metricsAddr, 30*time.Second, func(m map[string]float64) bool {
		return m["weir_collector_records_total"]+m["weir_collector_socket_drops_total"] >= float64(len(recs))
	})
	received := int64(m["weir_collector_records_total"])
	time.Sleep(500 * time.Millisecond) // a writeout or two against the full disk
	took, exited := p.stop(syscall.SIGTERM, 30*time.Second)
	ok = exited && took <= 5*time.Second
	if !ok {
		r.failf("collect: exit %v after SIGTERM with a full store (want ≤ 5 s)", took.Round(time.Millisecond))
	}
	stderr := p.errText()
	written, _ := statNumber(storeLine(stderr), "store: ")
	dropped := storeDropped(stderr)
	lost = received - written
	counted = dropped == lost
	if !counted {
		r.failf("collect: %d received, %d stored, %d counted dropped/lost:\n%s", received, written, dropped, tail(stderr))
	}
	if !strings.Contains(stderr, "no space left on device") {
		r.failf("collect: stderr does not say the disk is full:\n%s", tail(stderr))
		ok = false
	}
	note = fmt.Sprintf("collect: %d received, %d stored, %d counted dropped or lost at exit, SIGTERM exit %v", received, written, dropped, took.Round(time.Millisecond))
	return ok, lost, counted, note
}

// block is one block of a blocks file.
type block struct {
	off, size, headerLen int64
	rows                 int64
}

// readBlocks walks a blocks file.
func readBlocks(path string) ([]block, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var bs []block
	for off := int64(0); off+40 <= int64(len(b)); {
		h := b[off:]
		if string(h[:4]) != "WBK1" {
			return nil, fmt.Errorf("%s: no block at offset %d", path, off)
		}
		blk := block{off: off, size: int64(binary.LittleEndian.Uint32(h[4:8])), headerLen: int64(binary.LittleEndian.Uint32(h[8:12])),
			rows: int64(binary.LittleEndian.Uint32(h[16:20]))}
		if blk.size <= 0 {
			return nil, errors.New("block of size 0")
		}
		bs = append(bs, blk)
		off += blk.size
	}
	return bs, nil
}

// caseDamage: a store of 6 blocks (6 replays); on copies of it, a bit
// flipped in a random block header (8 tries) and the blocks file cut in
// the middle of a random block (4 tries). weir store check must exit 1
// and count exactly the records of the damaged blocks (and, for a cut,
// of every block after it); weir query must read the others and say so
// on stderr; --repair must leave a store that checks clean with those.
func caseDamage(r *result) {
	base := filepath.Join(workDir, "damage", "base")
	for i := range 6 {
		cmd := exec.Command(weirBin, "capture", "--synthetic", fmt.Sprintf("flows=%d,packets=%d,seed=%d", 2000+500*i, 8000, i+1),
			"--data-dir", base, "-o", "none")
		out, err := cmd.CombinedOutput()
		notePanic(cmd.Args[1:], string(out))
		if err != nil {
			r.failf("building the store: %v\n%s", err, tail(string(out)))
			return
		}
	}
	blocksPath, err := filepath.Glob(filepath.Join(base, "*", "*", "blocks"))
	if err != nil || len(blocksPath) != 1 {
		r.failf("want one blocks file under %s, found %v", base, blocksPath)
		return
	}
	rel, _ := filepath.Rel(base, blocksPath[0])
	blocks, err := readBlocks(blocksPath[0])
	if err != nil || len(blocks) < 4 {
		r.failf("blocks: %v (%d blocks)", err, len(blocks))
		return
	}
	var total int64
	for _, b := range blocks {
		total += b.rows
	}
	rng := mrand.New(mrand.NewPCG(21, 5))
	allCounted := true
	var damagedTotal int64
	for try := range 12 {
		r.tries++
		dir := filepath.Join(workDir, "damage", fmt.Sprint(try))
		if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
			r.failf("cp: %v %s", err, out)
			return
		}
		path := filepath.Join(dir, rel)
		k := rng.IntN(len(blocks))
		var want int64
		what := ""
		if try < 8 {
			b := blocks[k]
			at := b.off + rng.Int64N(b.headerLen)
			bit := byte(1) << rng.IntN(8)
			if err := flipByte(path, at, bit); err != nil {
				r.failf("%v", err)
				return
			}
			want, what = b.rows, fmt.Sprintf("bit %#x flipped at offset %d (block %d's header)", bit, at, k)
		} else {
			k = 1 + rng.IntN(len(blocks)-1)
			b := blocks[k]
			at := b.off + 1 + rng.Int64N(b.size-1)
			if err := os.Truncate(path, at); err != nil {
				r.failf("%v", err)
				return
			}
			for _, x := range blocks[k:] {
				want += x.rows
			}
			what = fmt.Sprintf("cut at offset %d (inside block %d of %d)", at, k, len(blocks))
		}
		damagedTotal += want
		survived := true
		c := storeCheck(dir, false)
		if c.code != 1 || c.lost != want || c.intact != total-want {
			r.failf("try %d, %s: store check exit %d, %d intact, %d lost; want exit 1, %d intact, %d lost:\n%s", try, what, c.code,
				c.intact, c.lost, total-want, want, tail(c.text))
			allCounted = false
			survived = false
		}
		rows, qerr, err := queryRows(dir)
		if err != nil || rows != total-want || !strings.Contains(qerr, "lost") {
			r.failf("try %d, %s: weir query read %d rows (want %d) (%v); stderr: %s", try, what, rows, total-want, err, tail(qerr))
			survived = false
		}
		rep := storeCheck(dir, true)
		after := storeCheck(dir, false)
		if after.code != 0 || after.intact != total-want {
			r.failf("try %d, %s: after --repair (exit %d) store check exit %d, %d intact (want %d):\n%s\n%s", try, what, rep.code, after.code,
				after.intact, total-want, tail(rep.text), tail(after.text))
			survived = false
		}
		vlogf("   try %d: %s: %d records lost, counted %d", try, what, want, c.lost)
		if survived {
			r.ok++
		}
	}
	r.lost = damagedTotal
	r.counted = map[bool]string{true: "yes", false: "no"}[allCounted]
	r.note = fmt.Sprintf("%d blocks, %d records; 8 header bit flips, 4 cuts mid-block: each said with file, offset and records lost; --repair leaves a clean store", len(blocks), total)
}

// flipByte xors b into the byte at off of path.
func flipByte(path string, off int64, b byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	one := make([]byte, 1)
	if _, err := f.ReadAt(one, off); err != nil {
		return err
	}
	one[0] ^= b
	_, err = f.WriteAt(one, off)
	return err
}
