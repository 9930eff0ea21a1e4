package testfleet

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var seq atomic.Uint64

// Unique is prefix followed by a suffix no other call in any process
// shares (the time, the pid and a counter): the name of a topic, group or
// database of one test run, so that runs on a shared fleet (WEIR_FLEET) or
// repeated runs never read each other's records.
func Unique(prefix string) string {
	return prefix + "_" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.Itoa(os.Getpid()) + "_" + strconv.FormatUint(seq.Add(1), 10)
}

// Database is a database name of prefix's own (Unique) on the fleet's
// ClickHouse, dropped when the test ends (its Kafka engine tables stop
// consuming with it).
func (f *Fleet) Database(prefix string) string {
	db := Unique(prefix)
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.ClickHouse+"/?"+url.Values{"query": {"DROP DATABASE IF EXISTS " + db}}.Encode(), nil)
		if err != nil {
			f.t.Errorf("dropping database %s: %v", db, err)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			f.t.Errorf("dropping database %s: %v", db, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			f.t.Errorf("dropping database %s: %s: %s", db, resp.Status, strings.TrimSpace(string(b)))
		}
	})
	return db
}
