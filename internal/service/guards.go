package service

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// writeGuard turns a write's explicit guard parameters into a policy.Guard.
func writeGuard(e *WriteExpected, unconditional bool, field string) (policy.Guard, error) {
	if unconditional {
		if e != nil {
			return policy.Guard{}, invalidParams("%s and unconditional exclude each other; pass one", field)
		}
		return policy.Guard{Unconditional: true}, nil
	}
	if e == nil {
		return policy.Guard{}, nil
	}
	switch e.Kind {
	case provider.CreateIfAbsent:
		if e.Version != "" {
			return policy.Guard{}, invalidParams("%s: createIfAbsent takes no version", field)
		}
		return policy.Guard{Write: &provider.WriteIntent{Kind: provider.CreateIfAbsent}}, nil
	case provider.ReplaceIfVersion:
		if e.Version == "" {
			return policy.Guard{}, invalidParams("%s: replaceIfVersion needs the version you read", field)
		}
		return policy.Guard{Write: &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: e.Version}}, nil
	}
	return policy.Guard{}, invalidParams(`%s.kind must be "createIfAbsent" or "replaceIfVersion", not %q`, field, e.Kind)
}

// versionGuard turns an edit/delete/move-source explicit guard into a
// policy.Guard.
func versionGuard(e *VersionExpected, unconditional bool, field string) (policy.Guard, error) {
	if unconditional {
		if e != nil {
			return policy.Guard{}, invalidParams("%s and unconditional exclude each other; pass one", field)
		}
		return policy.Guard{Unconditional: true}, nil
	}
	if e == nil {
		return policy.Guard{}, nil
	}
	if e.Version == "" {
		return policy.Guard{}, invalidParams("%s.version is required; pass the version you read", field)
	}
	return policy.Guard{Version: &provider.VersionGuard{Version: e.Version}}, nil
}

// mutationDone filters the error of a mutation: an observer failure leaves a
// valid outcome on disk and is only logged. What a mutation changed has its
// records (version, last writer, audit entry) written to the store before
// it is acknowledged, so a daemon killed after answering keeps them; the
// store groups concurrent callers into one write.
func (s *Service) mutationDone(op string, t provider.Target, err error) error {
	if err != nil && errors.Is(err, policy.ErrObserverFailed) {
		s.log.Warn("mutation applied but an observer failed", "op", op, "path", t.DisplayPath, "err", err)
		err = nil
	}
	// A failed request may still have changed something (a move whose
	// source could not be removed): flush whatever it recorded, too.
	if ferr := s.store.Flush(); ferr != nil {
		// The change is on disk; its records stay buffered and are
		// retried. The answer must still say what happened.
		s.log.Warn("mutation applied but its records are not written yet", "op", op, "path", t.DisplayPath, "err", ferr)
	}
	return s.explain(err, t)
}

// explain enriches a stale-version error with who changed the file last and
// when, if the store knows.
func (s *Service) explain(err error, t provider.Target) error {
	if err == nil || provider.CodeOf(err) != provider.CodeStaleVersion {
		return err
	}
	rec, ok := s.store.LastWrite(t.Key)
	if !ok {
		return err
	}
	var pe *provider.Error
	op := ""
	if errors.As(err, &pe) {
		op = pe.Op
	}
	return &provider.Error{
		Code: provider.CodeStaleVersion, Op: op, Path: t.DisplayPath, Err: err,
		Message: fmt.Sprintf("%s changed since you read it (%s); read it again, then redo your change",
			t.DisplayPath, DescribeChange(Change{Op: rec.Op, Channel: rec.Actor.Channel, PID: rec.Actor.PID,
				Session: rec.Actor.Session, SessionName: s.names.name(rec.Actor.Session), Age: time.Since(rec.Time)}, "")),
	}
}

// existsOnCreate rewrites the refusal of an explicit create-if-absent
// guard on t (noun: "the destination " or ""): the file exists, and reading it would not help, so the
// message says that instead of advising a read. Other errors pass through.
func existsOnCreate(err error, t provider.Target, g *WriteExpected, noun, what string) error {
	var pe *provider.Error
	if g == nil || g.Kind != provider.CreateIfAbsent || !errors.As(err, &pe) ||
		pe.Code != provider.CodeNotObserved || (pe.Path != "" && pe.Path != t.DisplayPath) {
		return err
	}
	return &provider.Error{Code: pe.Code, Op: pe.Op, Path: t.DisplayPath, Err: err,
		Message: fmt.Sprintf("%s%s already exists, and %s was guarded to create it; choose another name, or guard with its current version to replace it",
			noun, t.DisplayPath, what)}
}

// checkPath rejects empty paths and NUL bytes.
func checkPath(field, path string) error {
	if path == "" {
		return invalidArgument(path, "%s is required", field)
	}
	if strings.ContainsRune(path, 0) {
		return invalidArgument(strings.ReplaceAll(path, "\x00", `\0`), "%s contains a NUL byte; paths cannot contain NUL", field)
	}
	return nil
}

// checkCwd rejects NUL bytes in a cwd.
func checkCwd(cwd string) error {
	if strings.ContainsRune(cwd, 0) {
		return invalidArgument(strings.ReplaceAll(cwd, "\x00", `\0`), "cwd contains a NUL byte; paths cannot contain NUL")
	}
	return nil
}

// sessionParam checks an explicit session id's shape.
func sessionParam(id policy.SessionID) error {
	if strings.ContainsRune(string(id), 0) {
		return invalidParams("session contains a NUL byte")
	}
	return nil
}
