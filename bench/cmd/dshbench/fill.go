package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// runFill is `dshbench fill`: creates N small files (1,000 per directory),
// the population of the memory measurement.
func runFill(args []string) error {
	f := flag.NewFlagSet("fill", flag.ContinueOnError)
	dir := f.String("dir", "", "directory to fill")
	n := f.Int("n", 100000, "number of files")
	if err := f.Parse(args); err != nil {
		return err
	}
	return fillDir(*dir, *n)
}

// fillDir creates n small files below dir, 1,000 per directory d<k>, named
// f<i>.
func fillDir(dir string, n int) error {
	data := []byte("tracked file\n")
	for i := range n {
		d := filepath.Join(dir, "d"+strconv.Itoa(i/1000))
		if i%1000 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("fill: %w", err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)), data, 0o644); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
	}
	return nil
}
