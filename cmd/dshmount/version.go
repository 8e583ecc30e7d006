package main

import (
	"runtime/debug"
)

// stampedVersion is set at link time by `make build`
// (-ldflags "-X main.stampedVersion=…", from git describe); empty otherwise.
var stampedVersion string

// buildVersion returns the version this binary reports (`dshmount
// --version`, the MCP serverInfo.version): the stamped version, else the
// module version of a `go install …@vX`, else the VCS revision the build
// info records, else "devel".
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionFrom(stampedVersion, info)
}

// versionFrom picks the version from a stamp and the build info.
func versionFrom(stamp string, info *debug.BuildInfo) string {
	if stamp != "" {
		return stamp
	}
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "devel-" + rev
}
