package main

import (
	"bytes"
	"errors"
	"flag"
)

// parseFlags runs parse (fs.Parse or parseInterspersed over fs) with what
// fs prints held back: the usage asked for with -h or --help then goes to
// stdout (it is the command's answer, and it exits 0), a bad flag's error
// and usage to stderr. fs's usage function must print to fs.Output().
func parseFlags(fs *flag.FlagSet, sio stdio, parse func() error) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := parse()
	fs.SetOutput(sio.err)
	w := sio.err
	if errors.Is(err, flag.ErrHelp) {
		w = sio.out
	}
	_, _ = w.Write(buf.Bytes())
	return err
}
