package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
)

// consoleCSP keeps the console to its own files: no inline scripts, no
// other origins, no framing. Data from the API is only ever set as text.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one console file, compressed once at start.
type asset struct {
	body, gz []byte
	ctype    string
	etag     string
}

// console serves the web console's files.
type console struct {
	files map[string]*asset
	// inline, when set, is what index.html carries before </head> (the
	// data the page would otherwise ask first), or nil to serve it as built.
	inline func(*http.Request) []byte
}

// newConsole reads every file of files into memory (the build is a few
// hundred kB), with a gzip copy and an ETag each.
func newConsole(files fs.FS) (*console, error) {
	c := &console{files: map[string]*asset{}}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a := &asset{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: mime.TypeByExtension(path.Ext(p))}
		if a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression) // a valid level: no error
		_, _ = zw.Write(b)                                     // into memory: no error
		_ = zw.Close()
		if z.Len() < len(b) {
			a.gz = z.Bytes()
		}
		c.files["/"+p] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("api: console files: %w", err)
	}
	if c.files["/index.html"] == nil {
		return nil, fmt.Errorf("api: console files have no index.html")
	}
	return c, nil
}

// serve answers GET / (index.html) and the console's files.
func (c *console) serve(rw http.ResponseWriter, req *http.Request) *Error {
	p := req.URL.Path
	if p == "/" {
		p = "/index.html"
	}
	a := c.files[p]
	if a == nil || p == "/manifest.json" {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such page: " + req.URL.Path}
	}
	h := rw.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Frame-Options", "DENY")
	if i := bytes.Index(a.body, []byte("</head>")); p == "/index.html" && c.inline != nil && i >= 0 {
		if extra := c.inline(req); extra != nil {
			send(rw, req, a.ctype, slices.Concat(a.body[:i], extra, a.body[i:])) // this visit's own page: no-store, no ETag
			return nil
		}
	}
	h.Set("Cache-Control", "no-cache") // revalidate: the ETag changes with the build
	h.Set("ETag", a.etag)
	h.Add("Vary", "Accept-Encoding")
	if match := req.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		rw.WriteHeader(http.StatusNotModified)
		return nil
	}
	body := a.body
	if a.gz != nil && acceptsGzip(req) {
		body = a.gz
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Type", a.ctype)
	h.Set("Content-Length", fmt.Sprint(len(body)))
	if req.Method != http.MethodHead {
		_, _ = rw.Write(body)
	}
	return nil
}
