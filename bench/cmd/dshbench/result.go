package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// Metric is one measured quantity: every repetition's sample and their
// median. Unit says how to read it; HigherBetter is true for rates.
type Metric struct {
	Name         string    `json:"name"`
	Unit         string    `json:"unit"`
	HigherBetter bool      `json:"higher_better"`
	Samples      []float64 `json:"samples"`
	Median       float64   `json:"median"`
}

// Report is what one driver run prints: its metrics in order and notes on
// how they were measured.
type Report struct {
	Target  string   `json:"target"`
	Dir     string   `json:"dir"`
	Metrics []Metric `json:"metrics"`
	Notes   []string `json:"notes,omitempty"`
}

// add appends a sample to the metric name, creating it on first use.
func (r *Report) add(name, unit string, higher bool, v float64) {
	for i := range r.Metrics {
		if r.Metrics[i].Name == name {
			r.Metrics[i].Samples = append(r.Metrics[i].Samples, v)
			return
		}
	}
	r.Metrics = append(r.Metrics, Metric{Name: name, Unit: unit, HigherBetter: higher, Samples: []float64{v}})
}

// note adds a note once.
func (r *Report) note(s string) {
	if !slices.Contains(r.Notes, s) {
		r.Notes = append(r.Notes, s)
	}
}

// finish computes the medians.
func (r *Report) finish() {
	for i := range r.Metrics {
		r.Metrics[i].Median = median(r.Metrics[i].Samples)
	}
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// write prints r as indented JSON.
func (r *Report) write(w io.Writer) error {
	r.finish()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// get returns the metric name, or false.
func (r *Report) get(name string) (Metric, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}
