package main

import "github.com/weir-dev/weir/internal/cli"

// isTerminal says whether a writer is a terminal: the live table on
// stdout redraws in place there. Tests replace it to stand a buffer in
// for a terminal. (Standard error's terminal is progressOut.)
var isTerminal = cli.IsTerminal
