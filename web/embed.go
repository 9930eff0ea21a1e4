// Package web holds weir's web console: TypeScript sources in src/, built
// by 'make web' (npm ci, then esbuild through build.mjs) into dist/, which
// is committed and embedded here, so building weir needs no Node.
// dist/manifest.json records the SHA-256 of the sources the build came
// from; a test fails when the committed build does not match them.
package web

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Assets returns the built console: index.html and what it loads.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path, embedded above: cannot happen
	}
	return sub
}

// Stylesheet returns the console's built stylesheet (dist/app.css): its
// theme (CSS variables for both colour schemes, the series colours), fonts,
// panels and tables. 'weir bench compare --html' embeds it verbatim, so the
// report and the console share one look from one source.
func Stylesheet() []byte {
	b, err := fs.ReadFile(dist, "dist/app.css")
	if err != nil {
		panic(err) // embedded above and checked by TestEmbedded: cannot happen
	}
	return b
}
