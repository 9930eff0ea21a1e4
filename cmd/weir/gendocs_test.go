package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every command (and every subcommand a group's usage names) gets a man
// page made of its own help, with its flags, one-letter aliases folded in.
func TestGendocsManPages(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"_gendocs", "--man", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, page := range []string{"weir.1", "weir-capture.1", "weir-collect.1", "weir-query.1", "weir-serve.1",
		"weir-store-check.1", "weir-services-explain.1", "weir-clickhouse-setup.1", "weir-bench-run.1",
		"weir-bench-compare.1", "weir-bench-gendb.1", "weir-bench-lbstress.1", "weir-completion.1", "weir-version.1"} {
		if _, err := os.Stat(filepath.Join(dir, page)); err != nil {
			t.Errorf("no %s: %v", page, err)
		}
	}
	capture, err := os.ReadFile(filepath.Join(dir, "weir-capture.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`\fB\-i\fR, \fB\-\-interface\fR`, `\fB\-o\fR, \fB\-\-output\fR \fIformat\fR`, ".SH EXAMPLES"} {
		if !strings.Contains(string(capture), want) {
			t.Errorf("weir-capture.1 lacks %q", want)
		}
	}
	if strings.Contains(string(capture), `\fB\-o\fR \fIstring\fR`) {
		t.Error("weir-capture.1 lists -o apart from --output")
	}
	top, _ := os.ReadFile(filepath.Join(dir, "weir.1"))
	if strings.Contains(string(top), "_child") || strings.Contains(string(top), "_gendocs") {
		t.Error("weir.1 lists a hidden command")
	}
}

func TestCompletionCommand(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"completion", shell}, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: exit %d: %s", shell, code, stderr.String())
		}
		for _, want := range []string{"capture", "bench", "data-dir"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%s completion lacks %q", shell, want)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", "tcsh"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "bash, zsh, fish") {
		t.Errorf("tcsh: exit %d, %q; want a usage error naming the shells", code, stderr.String())
	}
}
