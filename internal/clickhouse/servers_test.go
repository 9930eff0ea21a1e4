package clickhouse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/testfleet"
)

// server is a ClickHouse the tests run weir's SQL on.
type server struct {
	name string
	conn Conn
}

// servers starts the two: Debian's 18.16 (scripts/cluster.sh) and chDB
// (current ClickHouse in-process, from build/venv). Either is skipped with
// a message when it cannot run here, except under CI=true.
func servers(t *testing.T) []server {
	var out []server
	if why := testfleet.Missing(testfleet.ClickHouse); why != "" && os.Getenv("CI") != "true" {
		t.Logf("ClickHouse 18.16 skipped: %s", why)
	} else {
		f := testfleet.Start(t, testfleet.ClickHouse)
		c, err := NewHTTP(f.ClickHouse, "", "")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, server{"18.16", c})
	}
	out = append(out, chdbServer(t)...)
	if len(out) == 0 {
		t.Skip("skipped: neither ClickHouse 18.16 nor chDB can run here (scripts/deps.sh fleet installs both)")
	}
	return out
}

// chdbConn runs statements in chDB through testdata/chdb_runner.py.
type chdbConn struct {
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Reader
}

func chdbServer(t *testing.T) []server {
	root, _ := filepath.Abs("../..")
	py := filepath.Join(root, "build", "venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chDB is not installed in build/venv (scripts/deps.sh test installs it)")
		}
		t.Log("chDB skipped: build/venv has no python (scripts/deps.sh fleet installs chdb there)")
		return nil
	}
	cmd := exec.Command(py, filepath.Join("testdata", "chdb_runner.py"), t.TempDir())
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if stderr.Len() > 0 {
			t.Logf("chdb stderr: %s", stderr.String())
		}
	})
	c := &chdbConn{in: in, out: bufio.NewReader(out)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := Probe(ctx, c); err != nil {
		t.Fatalf("chdb: %v", err)
	}
	return []server{{"chdb", c}}
}

func (c *chdbConn) Do(ctx context.Context, sql string, params map[string]string, body io.Reader) (io.ReadCloser, error) {
	var data []byte
	if body != nil {
		var err error
		if data, err = io.ReadAll(body); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, _ := json.Marshal(map[string]any{"sql": sql, "params": params, "body": len(data)})
	if _, err := c.in.Write(append(append(h, '\n'), data...)); err != nil {
		return nil, err
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("chdb: %w", err)
	}
	var resp struct {
		OK    bool   `json:"ok"`
		Len   int    `json:"len"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, err
	}
	if !resp.OK {
		return nil, fmt.Errorf("%w: chdb: %s", ErrServer, resp.Error)
	}
	b := make([]byte, resp.Len)
	if _, err := io.ReadFull(c.out, b); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}
