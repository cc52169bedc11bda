package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// ErrUnpublishedRelease: the version pins a release of a known line that its
// vendor never published, so no image has that tag ("16.99", "7.0.99").
var ErrUnpublishedRelease = errors.New("unpublished release")

// Published is a set of releases published after the catalog was built, keyed
// by engine name ("postgresql") and then by full version ("18.6"). The
// DatabaseValidation admission plugin builds it from its configuration.
type Published map[string]map[string]bool

// Add records version as a published release of engine.
func (p Published) Add(engine examplev1.Engine, version string) {
	if p[string(engine)] == nil {
		p[string(engine)] = map[string]bool{}
	}
	p[string(engine)][version] = true
}

// CheckRelease returns nil when version names an image of engine: a release
// line alone ("16", "8.4", "7.0", which follows the line's newest release),
// or a release of the line its vendor published, in the catalog's list
// (Releases) or in extra, which may be nil.
//
// The error is Lookup's for an engine or line outside the catalog, and wraps
// ErrUnpublishedRelease for a release of a known line that is in neither list;
// its message names the line's published releases ("the 16 line has 16.0 to
// 16.15") and says that the line alone follows the newest.
func CheckRelease(engine examplev1.Engine, version string, extra Published) error {
	release, err := Lookup(engine, version)
	if err != nil || release.Floating {
		return err
	}
	if slices.Contains(Releases(engine, release.Line), version) || extra[string(engine)][version] {
		return nil
	}
	c, _ := catalogFor(engine)
	published := ranges(release.Line, c.Published[release.Line])
	var added []string
	for v := range extra[string(engine)] {
		if strings.HasPrefix(v, release.Line+".") && !slices.Contains(Releases(engine, release.Line), v) {
			added = append(added, v)
		}
	}
	slices.SortFunc(added, func(a, b string) int {
		pa, _ := strconv.Atoi(strings.TrimPrefix(a, release.Line+"."))
		pb, _ := strconv.Atoi(strings.TrimPrefix(b, release.Line+"."))
		return pa - pb
	})
	published = append(published, added...)
	return &catalogError{kind: ErrUnpublishedRelease, msg: fmt.Sprintf(
		"%s %q is not a published release: the %s line has %s, and %q alone follows its newest release",
		engine, version, release.Line, strings.Join(published, ", "), release.Line)}
}

// IsRelease reports whether version pins a release of one of engine's lines
// ("18.6", "8.4.12"), published or not: the form an operator may add to
// Published. A line alone ("18") and a version outside the catalog's lines
// ("19.0") are not.
func IsRelease(engine examplev1.Engine, version string) bool {
	release, err := Lookup(engine, version)
	return err == nil && !release.Floating
}

// Releases returns the published releases of engine's line in the catalog,
// oldest first ("16.0" … "16.15"), or nil for an unknown engine or line.
func Releases(engine examplev1.Engine, line string) []string {
	c, err := catalogFor(engine)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range c.Published[line] {
		out = append(out, line+"."+strconv.Itoa(p))
	}
	return out
}

// NewestReleases returns the newest published release of each of engine's
// lines in the catalog, oldest line first ("13.23", "14.24", …), or nil for an
// unknown engine.
func NewestReleases(engine examplev1.Engine) []string {
	var out []string
	for _, line := range Lines(engine) {
		if r := Releases(engine, line); len(r) > 0 {
			out = append(out, r[len(r)-1])
		}
	}
	return out
}

// ranges writes the releases of line as runs, "16.0 to 16.15" or
// "8.0.11 to 8.0.28, 8.0.30 to 8.0.37", a lone release as itself.
func ranges(line string, patches []int) []string {
	var out []string
	for i := 0; i < len(patches); {
		j := i
		for j+1 < len(patches) && patches[j+1] == patches[j]+1 {
			j++
		}
		run := fmt.Sprintf("%s.%d", line, patches[i])
		if j > i {
			run += fmt.Sprintf(" to %s.%d", line, patches[j])
		}
		out = append(out, run)
		i = j + 1
	}
	return out
}

// Span returns first to last, without the numbers in except: the releases of a
// line, but those its vendor withdrew or never published.
func Span(first, last int, except ...int) []int {
	var out []int
	for n := first; n <= last; n++ {
		if !slices.Contains(except, n) {
			out = append(out, n)
		}
	}
	return out
}
