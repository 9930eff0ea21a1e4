// Package clickhouse puts weir's records into ClickHouse and asks them
// back: Setup creates the flows table, its ingestion from Kafka (the
// server's own Kafka engine reading internal/wire's RowBinary rows) and the
// 1-minute and 1-hour rollups; Run answers a query.Query with SQL, from the
// coarsest table that answers it exactly, as a query.Result.
//
// It speaks ClickHouse's HTTP interface with net/http. User values reach
// SQL as query parameters ({name:Type}) where the server has them (19.11
// and later) and otherwise as literals from a strict, fuzzed encoder; every
// other part of a statement is weir's own text. Version-specific DDL (TTL)
// is gated on SELECT version(). The same statements run on 18.16 (Debian's
// package) and on current ClickHouse (chDB in the tests).
package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Conn runs one statement: sql, with params (name → value) for its
// {name:Type} placeholders, and body as the statement's data (an INSERT's
// rows), returning the statement's output. The HTTP client is one; the
// tests add chDB, current ClickHouse in-process.
type Conn interface {
	Do(ctx context.Context, sql string, params map[string]string, body io.Reader) (io.ReadCloser, error)
}

// HTTP is a Conn to a ClickHouse server's HTTP interface.
type HTTP struct {
	base     *url.URL
	hc       *http.Client
	user     string
	password string
}

// ErrServer wraps the errors the server reports.
var ErrServer = errors.New("clickhouse")

// maxErrBody bounds how much of an error response is read.
const maxErrBody = 16 << 10

// NewHTTP returns a Conn to rawURL (http:// or https://HOST:PORT), as user
// (default: the server's default user) with the password in passwordFile
// (none if ""): secrets come only from files.
func NewHTTP(rawURL, user, passwordFile string) (*HTTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("clickhouse: URL %q: want http://HOST:PORT or https://HOST:PORT (credentials with --user and --password-file)", rawURL)
	}
	c := &HTTP{base: u, user: user,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}}}
	if passwordFile != "" {
		b, err := os.ReadFile(passwordFile)
		if err != nil {
			return nil, fmt.Errorf("clickhouse: password file: %w", err)
		}
		c.password = strings.TrimRight(string(b), "\r\n")
	}
	return c, nil
}

// Do posts sql (in the body, or in the URL when body carries data) with
// its parameters, and returns the response body; a server error is an
// ErrServer with the server's message, cleaned of control characters.
func (c *HTTP) Do(ctx context.Context, sql string, params map[string]string, body io.Reader) (io.ReadCloser, error) {
	u := *c.base
	u.Path = "/"
	q := url.Values{}
	for k, v := range params {
		q.Set("param_"+k, v)
	}
	if body == nil {
		body = strings.NewReader(sql)
	} else {
		q.Set("query", sql)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return nil, err
	}
	if c.user != "" {
		req.Header.Set("X-ClickHouse-User", c.user)
		req.Header.Set("X-ClickHouse-Key", c.password)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %s: %w", c.base.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrBody))
		return nil, fmt.Errorf("%w: %s: %s", ErrServer, resp.Status, Clean(string(bytes.TrimSpace(msg))))
	}
	return resp.Body, nil
}

// Clean makes text from a server safe for a terminal: control characters
// (but newline and tab) become U+FFFD.
func Clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// Exec runs a statement whose output is not wanted.
func Exec(ctx context.Context, c Conn, s *Stmt) error {
	rc, err := c.Do(ctx, s.SQL(), s.Params(), nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, rc)
	return errors.Join(err, rc.Close())
}

// Version is a server's version, as SELECT version() gives it.
type Version struct{ Major, Minor, Patch int }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Features are what weir's statements depend on, by server version.
type Features struct {
	Version Version
	Params  bool // query parameters {name:Type} (19.11)
	TTL     bool // table TTL (19.6)
}

// MinVersion is the oldest server weir supports: Debian 12's package.
var MinVersion = Version{18, 16, 0}

// Probe asks the server for its version and derives its features; an
// older server than MinVersion is an error.
func Probe(ctx context.Context, c Conn) (Features, error) {
	rc, err := c.Do(ctx, "SELECT version() FORMAT RowBinary", nil, nil)
	if err != nil {
		return Features{}, err
	}
	defer rc.Close()
	r := newReader(rc)
	s := r.str()
	if r.err != nil {
		return Features{}, fmt.Errorf("clickhouse: reading the server's version: %w", r.err)
	}
	v, err := ParseVersion(s)
	if err != nil {
		return Features{}, err
	}
	if !v.AtLeast(MinVersion.Major, MinVersion.Minor) {
		return Features{}, fmt.Errorf("clickhouse: server %v is older than %v, the oldest weir supports", v, MinVersion)
	}
	return Features{Version: v, Params: v.AtLeast(19, 11), TTL: v.AtLeast(19, 6)}, nil
}

// ParseVersion reads "18.16.1" or "26.9.2.1".
func ParseVersion(s string) (Version, error) {
	parts := strings.SplitN(s, ".", 4)
	var n [3]int
	for i := range n {
		if i >= len(parts) {
			break
		}
		x, err := strconv.Atoi(parts[i])
		if err != nil || x < 0 {
			return Version{}, fmt.Errorf("clickhouse: version %q: not major.minor.patch", Clean(s))
		}
		n[i] = x
	}
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("clickhouse: version %q: not major.minor.patch", Clean(s))
	}
	return Version{n[0], n[1], n[2]}, nil
}
