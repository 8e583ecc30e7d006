package kv

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Errors of the registry and of engines that guard their files with a lock,
// matched with errors.Is.
var (
	// ErrUnknownScheme: no engine is registered for the URL's scheme.
	ErrUnknownScheme = errors.New("unknown store scheme")
	// ErrBadURL: the store URL is not SCHEME://REST, or an engine refused
	// the rest of it.
	ErrBadURL = errors.New("malformed store URL")
	// ErrLocked: another process (or another opener in this one) holds the
	// engine's files.
	ErrLocked = errors.New("store is locked by another opener")
)

// OpenFunc opens an engine from a store URL whose scheme it was registered
// for. rest is what follows "SCHEME://". A malformed rest is an error
// wrapping ErrBadURL.
type OpenFunc func(ctx context.Context, rest string) (Store, error)

// CheckFunc validates a store URL's rest without opening anything (an error
// wraps ErrBadURL), so a daemon refuses a bad URL before it starts.
type CheckFunc func(rest string) error

// Registry maps URL schemes to the engines that open them. The zero value
// is empty and ready; it is not safe for concurrent Register calls (the
// daemon fills it once at start).
type Registry struct {
	open  map[string]OpenFunc
	check map[string]CheckFunc
}

// schemeRE is RFC 3986's scheme syntax.
var schemeRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// Register makes Open hand URLs of scheme to open, and Check to check when
// one is given. A scheme registered twice,
// or not of RFC 3986's shape (lower case), is a programming error: it panics.
func (r *Registry) Register(scheme string, open OpenFunc, check ...CheckFunc) {
	if !schemeRE.MatchString(scheme) {
		panic(fmt.Sprintf("kv: store scheme %q is not a URL scheme", scheme))
	}
	if _, dup := r.open[scheme]; dup {
		panic(fmt.Sprintf("kv: store scheme %q registered twice", scheme))
	}
	if r.open == nil {
		r.open = make(map[string]OpenFunc)
	}
	r.open[scheme] = open
	for _, c := range check {
		if r.check == nil {
			r.check = make(map[string]CheckFunc)
		}
		r.check[scheme] = c
	}
}

// Schemes lists the registered schemes, sorted (for help text).
func (r *Registry) Schemes() []string {
	out := make([]string, 0, len(r.open))
	for s := range r.open {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// split returns url's scheme and rest, or the error Open and Check give.
func (r *Registry) split(url string) (scheme, rest string, err error) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok || !schemeRE.MatchString(scheme) {
		return "", "", fmt.Errorf("store %q: %w: want SCHEME://… with SCHEME one of %s", url, ErrBadURL, strings.Join(r.Schemes(), ", "))
	}
	if _, ok := r.open[scheme]; !ok {
		return "", "", fmt.Errorf("store %q: %w %q: want one of %s", url, ErrUnknownScheme, scheme, strings.Join(r.Schemes(), ", "))
	}
	return scheme, rest, nil
}

// Check reports Open's URL errors (malformed, unknown scheme, and what the
// engine's CheckFunc finds) without opening anything.
func (r *Registry) Check(url string) error {
	scheme, rest, err := r.split(url)
	if err != nil {
		return err
	}
	if c := r.check[scheme]; c != nil {
		if err := c(rest); err != nil {
			return fmt.Errorf("store %s: %w", url, err)
		}
	}
	return nil
}

// Open opens the engine url names (SCHEME://REST). A URL without "://" is an
// error wrapping ErrBadURL; a scheme nobody registered, one wrapping
// ErrUnknownScheme and naming the known ones.
func (r *Registry) Open(ctx context.Context, url string) (Store, error) {
	if err := r.Check(url); err != nil {
		return nil, err
	}
	scheme, rest, _ := r.split(url)
	e, err := r.open[scheme](ctx, rest)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", url, err)
	}
	return e, nil
}
