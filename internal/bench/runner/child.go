//go:build linux

package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/internal/bench/engine"
)

// The parent and its children talk in JSON lines over the children's
// standard input and output: never over the test network, whose only
// traffic is the profile's.

// msg is one line either way; exactly one field is set.
type msg struct {
	Plan   *engine.Plan         `json:"plan,omitempty"`   // parent → server: bind
	Start  bool                 `json:"start,omitempty"`  // parent → server: serve
	Finish bool                 `json:"finish,omitempty"` // parent → server: the clients are done
	Client *clientSpec          `json:"client,omitempty"` // parent → client: run
	Stop   *stopMsg             `json:"stop,omitempty"`   // client → parent → server
	Reply  *stopMsg             `json:"reply,omitempty"`  // server → parent → client
	Ready  bool                 `json:"ready,omitempty"`  // server → parent: bound
	Error  string               `json:"error,omitempty"`  // child → parent: cannot go on
	Server *engine.ServerResult `json:"server,omitempty"` // server → parent: at the end
	Result *engine.ClientResult `json:"result,omitempty"` // client → parent: at the end
}

// clientSpec is a client process's whole configuration.
type clientSpec struct {
	Plan     engine.Plan     `json:"plan"`
	Pair     int             `json:"pair"`
	Local    [2]engine.Addrs `json:"local"`
	Server   [2]engine.Addrs `json:"server"`
	T0       int64           `json:"t0"` // Unix ns: start together
	Interval time.Duration   `json:"interval"`
}

// stopMsg is one Stopper call (N) or its answer (M or Err).
type stopMsg struct {
	ID  uint64     `json:"id"`
	Key engine.Key `json:"key"`
	Txn int        `json:"txn"`
	N   uint64     `json:"n"`
	M   uint64     `json:"m"`
	Err string     `json:"err,omitempty"`
}

// maxLine bounds one line from a child (a client's result with every
// connection it made).
const maxLine = 256 << 20

// lineWriter writes whole lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) send(m *msg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.w.Write(append(b, '\n'))
	return err
}

// readLines calls fn for each line of r until EOF, an error, or fn's error.
func readLines(r io.Reader, fn func(*msg) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			var m msg
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				return fmt.Errorf("bad line from the other side: %w", jerr)
			}
			if ferr := fn(&m); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > maxLine {
			return nil, errors.New("line too long")
		}
		if err != bufio.ErrBufferFull {
			return out, err
		}
	}
}

// Serve is the server child: it binds the plan's sockets, serves once told
// to start, answers stops, and writes its totals when told the clients are
// done. It returns when its input ends.
func Serve(in io.Reader, out io.Writer) error {
	w := &lineWriter{w: out}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var srv *engine.Server
	var stops sync.WaitGroup
	err := readLines(in, func(m *msg) error {
		switch {
		case m.Plan != nil:
			if srv != nil {
				return errors.New("second plan")
			}
			var err error
			if srv, err = engine.NewServer(*m.Plan); err != nil {
				_ = w.send(&msg{Error: err.Error()}) // best effort: err is returned either way
				return err
			}
			return w.send(&msg{Ready: true})
		case srv == nil:
			return errors.New("no plan yet")
		case m.Start:
			srv.Start(ctx)
		case m.Stop != nil:
			s := *m.Stop
			stops.Add(1)
			go func() { // StopAt may wait for the thread to drain
				defer stops.Done()
				r := s
				var err error
				if r.M, err = srv.StopAt(s.Key, s.Txn, s.N); err != nil {
					r.Err = err.Error()
				}
				_ = w.send(&msg{Reply: &r}) // a parent that is gone has nobody to tell
			}()
		case m.Finish:
			res := srv.Wait()
			stops.Wait()
			srv.Close()
			return w.send(&msg{Server: res})
		}
		return nil
	})
	cancel() // input ended: stop whatever still runs
	if srv != nil {
		srv.Close()
	}
	return err
}

// pipeStopper is a client child's Stopper: a line out, the answer in.
type pipeStopper struct {
	w       *lineWriter
	id      atomic.Uint64
	mu      sync.Mutex
	waiting map[uint64]chan *stopMsg
}

func (p *pipeStopper) Stop(k engine.Key, txn int, n uint64) (uint64, error) {
	id := p.id.Add(1)
	ch := make(chan *stopMsg, 1)
	p.mu.Lock()
	p.waiting[id] = ch
	p.mu.Unlock()
	if err := p.w.send(&msg{Stop: &stopMsg{ID: id, Key: k, Txn: txn, N: n}}); err != nil {
		return 0, err
	}
	r, ok := <-ch
	if !ok {
		return 0, errors.New("the parent went away")
	}
	if r.Err != "" {
		return 0, errors.New(r.Err)
	}
	return r.M, nil
}

func (p *pipeStopper) answer(r *stopMsg) {
	p.mu.Lock()
	ch := p.waiting[r.ID]
	delete(p.waiting, r.ID)
	p.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

func (p *pipeStopper) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, ch := range p.waiting {
		close(ch)
		delete(p.waiting, id)
	}
}

// Client is the client child: it reads its spec, runs the pair's threads
// from T0 on, and writes what they measured.
func Client(in io.Reader, out io.Writer) error {
	w := &lineWriter{w: out}
	st := &pipeStopper{w: w, waiting: map[uint64]chan *stopMsg{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	specs := make(chan *clientSpec, 1)
	inDone := make(chan error, 1)
	go func() {
		err := readLines(in, func(m *msg) error {
			switch {
			case m.Client != nil:
				specs <- m.Client
			case m.Reply != nil:
				st.answer(m.Reply)
			}
			return nil
		})
		cancel() // the parent is gone or done: stop
		st.closeAll()
		inDone <- err
	}()
	var spec *clientSpec
	select {
	case spec = <-specs:
	case err := <-inDone:
		return fmt.Errorf("input ended before the client spec: %v", err)
	}
	if err := spec.Plan.Check(); err != nil {
		_ = w.send(&msg{Error: err.Error()}) // best effort: err is returned either way
		return err
	}
	t0 := time.Unix(0, spec.T0)
	time.Sleep(time.Until(t0))
	res := engine.RunClient(ctx, &engine.ClientConfig{
		Plan: spec.Plan, Pair: spec.Pair, Local: spec.Local, Server: spec.Server,
		Stop: st, T0: t0, Interval: spec.Interval,
	})
	return w.send(&msg{Result: res})
}
