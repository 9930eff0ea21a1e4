package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manifest is dist/manifest.json, written by build.mjs.
type manifest struct {
	InputsSHA256 string            `json:"inputs_sha256"`
	Esbuild      string            `json:"esbuild"`
	Files        map[string]string `json:"files"`
}

// inputsHash computes what build.mjs records: SHA-256 over each input
// (package.json, package-lock.json, tsconfig.json, build.mjs and every
// file under src/, sorted by path) as "path\0length\0content".
func inputsHash(t *testing.T) string {
	t.Helper()
	paths := []string{"package.json", "package-lock.json", "tsconfig.json", "build.mjs"}
	err := filepath.WalkDir("src", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, filepath.ToSlash(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func readManifest(t *testing.T) manifest {
	t.Helper()
	b, err := os.ReadFile("dist/manifest.json")
	if err != nil {
		t.Fatalf("%v: run 'make web'", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBuildMatchesSources fails when the committed build in dist/ was not
// made from the committed sources: the inputs' hash differs from the one
// the build recorded, or a built file differs from its recorded hash, or
// dist/ holds a file the build did not write. Run 'make web' and commit
// dist/.
func TestBuildMatchesSources(t *testing.T) {
	m := readManifest(t)
	if got := inputsHash(t); got != m.InputsSHA256 {
		t.Errorf("web/src, package.json, package-lock.json, tsconfig.json or build.mjs changed since dist/ was built "+
			"(inputs %s, the build recorded %s): run 'make web' and commit web/dist", got[:12], m.InputsSHA256[:12])
	}
	entries, err := os.ReadDir("dist")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "manifest.json" {
			continue
		}
		want, ok := m.Files[name]
		if !ok {
			t.Errorf("dist/%s is not in the manifest: not written by the build", name)
			continue
		}
		b, err := os.ReadFile(filepath.Join("dist", name))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want {
			t.Errorf("dist/%s differs from what the build wrote: run 'make web'", name)
		}
		delete(m.Files, name)
	}
	for name := range m.Files {
		t.Errorf("dist/%s is in the manifest but missing", name)
	}
}

// maxGzipped bounds the console's download: every file the page loads,
// gzip-compressed (as the server sends them).
const maxGzipped = 300 << 10

// TestBundleSize: the built console stays under 300 kB gzipped.
func TestBundleSize(t *testing.T) {
	total := 0
	var parts []string
	// index.html, app.css, app.js and the chunks it imports (the charts').
	names, err := fs.Glob(Assets(), "*.js")
	if err != nil || len(names) == 0 {
		t.Fatalf("no scripts in dist/: %v", err)
	}
	for _, name := range append([]string{"index.html", "app.css"}, names...) {
		b, err := fs.ReadFile(Assets(), name)
		if err != nil {
			t.Fatal(err)
		}
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		total += z.Len()
		parts = append(parts, fmt.Sprintf("%s %d B", name, z.Len()))
	}
	t.Logf("gzipped: %s; total %d B", strings.Join(parts, ", "), total)
	if total > maxGzipped {
		t.Errorf("the console is %d B gzipped, over the %d B budget", total, maxGzipped)
	}
	if total < 10<<10 {
		t.Errorf("the console is only %d B gzipped: the embedded build looks like a stub", total)
	}
}

// TestEmbedded: the embedded files are the ones in dist/.
func TestEmbedded(t *testing.T) {
	m := readManifest(t)
	for name, want := range m.Files {
		b, err := fs.ReadFile(Assets(), name)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want {
			t.Errorf("embedded %s differs from dist/", name)
		}
	}
	if _, err := fs.ReadFile(Assets(), "index.html"); err != nil {
		t.Fatal(err)
	}
}
