// Package catalog is the engine version catalog: which values of
// spec.version name a real container image for each engine, when each release
// line reaches its vendor's end of life, and which version changes a running
// database can take in place.
//
// Each engine package registers its Catalog (Register): its image, whose tags
// are the vendor's version numbers, its release lines with their end-of-life
// dates, its published releases and its rule for changes across lines, from
// the vendor's support policy and upgrade documentation, cited where they are
// given. The catalog never reads the clock: callers pass "now" to
// Release.PastEndOfLife.
package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// Errors the catalog wraps, for errors.Is; the messages themselves are
// sentences meant for the user.
var (
	// ErrUnknownEngine: the engine is none of the registered catalogs'.
	ErrUnknownEngine = errors.New("unknown engine")
	// ErrUnsupportedVersion: the version names no image the catalog knows.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrUnsafeChange: CheckUpgrade refused a version change.
	ErrUnsafeChange = errors.New("version change is not safe in place")
)

// Release is one catalog entry: a version as the user wrote it, resolved to
// its release line and image.
type Release struct {
	// Engine is the engine the version belongs to.
	Engine examplev1.Engine
	// Version is spec.version exactly as given, e.g. "14.5".
	Version string
	// Line is the release line: a major ("14") or a release series ("8.4",
	// "7.0"), as the engine's catalog names them.
	Line string
	// Floating is true when Version names only the line ("14", "8.4"): the
	// image tag then follows the newest release of the line.
	Floating bool
	// Image is the container image, e.g. "postgres:14.5".
	Image string
	// EndOfLife is the vendor's end-of-life date of the line, at 00:00 UTC.
	EndOfLife time.Time
}

// PastEndOfLife reports whether now is on or after the line's end-of-life
// date (00:00 UTC of that day).
func (r Release) PastEndOfLife(now time.Time) bool {
	return !now.Before(r.EndOfLife)
}

// Lookup resolves version for engine to its line and image tag. Accepted
// forms, as the images are tagged: a line ("14", "8.4") or a line and one more
// component pinning a release in it ("14.5", "8.4.2"), for the engine's lines
// (Catalog.LineParts, Catalog.Lines). Components are decimal without leading zeros. Lookup does not check that a
// pinned release was published: CheckRelease does.
//
// The error wraps ErrUnknownEngine for an engine without a registered
// catalog, and ErrUnsupportedVersion, listing the supported
// versions, for any other version ("12", "5.7", "latest", "14.5.1").
func Lookup(engine examplev1.Engine, version string) (Release, error) {
	c, err := catalogFor(engine)
	if err != nil {
		return Release{}, err
	}
	v, err := c.parse(version)
	if err != nil {
		return Release{}, err
	}
	l := c.Lines[v.line]
	return Release{
		Engine:    engine,
		Version:   version,
		Line:      l.Name,
		Floating:  v.floating,
		Image:     c.Image + ":" + version,
		EndOfLife: l.EndOfLife,
	}, nil
}

// Supported returns the supported versions of engine in a human-readable
// form, oldest line first: each line followed by ".x", meaning the line
// itself or any release in it ("14.x" accepts "14" and "14.5"; "8.4.x"
// accepts "8.4" and "8.4.2"). It is meant as the list of a field.NotSupported
// error. It returns nil for an unknown engine.
func Supported(engine examplev1.Engine) []string {
	c, err := catalogFor(engine)
	if err != nil {
		return nil
	}
	out := make([]string, len(c.Lines))
	for i, l := range c.Lines {
		out[i] = l.Name + ".x"
	}
	return out
}

// Lines returns the release line names of engine, oldest first ("13" … "18").
// Each is itself a valid version. It returns nil for an unknown engine.
func Lines(engine examplev1.Engine) []string {
	c, err := catalogFor(engine)
	if err != nil {
		return nil
	}
	out := make([]string, len(c.Lines))
	for i, l := range c.Lines {
		out[i] = l.Name
	}
	return out
}

// CheckUpgrade returns nil when a running database of engine can change from
// version from to version to in place, and otherwise an error, wrapping
// ErrUnsafeChange, that says why and what to do instead. Rules:
//
//   - equal versions, and minor or patch upgrades within a line, are safe;
//   - any downgrade is refused, across lines or within one;
//   - an upgrade to another line is the engine's to judge
//     (Catalog.AcrossLines, from its upgrade documentation).
//
// A version naming only a line ("14", "8.4") follows the newest release of the
// line, so it counts as newer than every pinned release of that line: "14.5"
// → "14" is an upgrade, "14" → "14.5" may be a downgrade and is refused.
//
// An unknown engine or a to outside the catalog returns Lookup's error; a
// from outside the catalog (say, a line since removed) is refused with
// ErrUnsafeChange, since the change cannot be judged.
func CheckUpgrade(engine examplev1.Engine, from, to string) error {
	c, err := catalogFor(engine)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	refuse := func(format string, args ...any) error {
		prefix := fmt.Sprintf("cannot change %s from version %q to %q in place: ", engine, from, to)
		return &catalogError{kind: ErrUnsafeChange, msg: prefix + fmt.Sprintf(format, args...)}
	}
	t, err := c.parse(to)
	if err != nil {
		return err
	}
	f, err := c.parse(from)
	if err != nil {
		return refuse("the current version %q is not in the catalog, so the change cannot be judged safe; create a new Database at version %q and move the data into it",
			from, to)
	}

	switch cmp := compare(f, t); {
	case cmp == 0:
		return nil
	case cmp > 0 && f.floating && f.line == t.line:
		return refuse("%q follows the newest %s.x release, which may be newer than %s, and downgrades are not safe; keep %q, or restore a backup into a new Database at version %q",
			from, c.Lines[f.line].Name, to, from, to)
	case cmp > 0:
		return refuse("downgrades are not safe, because the newer server may already have rewritten the data files and system tables; keep %q or a later version, or restore a backup into a new Database at version %q",
			from, to)
	}
	if f.line == t.line {
		return nil
	}

	if why := c.AcrossLines(c, c.Lines[f.line], c.Lines[t.line], to); why != "" {
		return refuse("%s", why)
	}
	return nil
}

// catalogError carries a user-facing message and the sentinel it stands for.
type catalogError struct {
	kind error
	msg  string
}

func (e *catalogError) Error() string { return e.msg }
func (e *catalogError) Unwrap() error { return e.kind }

// Line is one release line of an engine.
type Line struct {
	// Name is the line as written in spec.version: "14", "8.4", "7.0".
	Name string
	// Series groups lines that upgrade into each other freely (innovation and
	// LTS releases of one major); consecutive series are one upgrade step
	// apart. A line that is a series of its own is SingleLine.
	Series int
	// SeriesName is how messages name the series: "8.0", "8.4", "9.x".
	SeriesName string
	// EndOfLife is the vendor's published end-of-life date, at 00:00 UTC.
	EndOfLife time.Time
}

// Catalog is what the catalog knows about one engine, which its engine package
// registers (Register).
type Catalog struct {
	Engine examplev1.Engine
	// Image is the image repository; the tag is spec.version.
	Image string
	// LineParts is the number of dot-separated components naming a line: 1
	// for a major ("14"), 2 for a release series ("8.4", "7.0"). One more
	// component pins a release in the line.
	LineParts int
	// Form says how versions are written, for error messages.
	Form string
	// Lines, oldest (and lowest) first.
	Lines []Line
	// Published lists, per line name, the number after the line of every
	// release its vendor published, ascending: the tags the images carry.
	Published map[string][]int
	// AcrossLines says why a running database cannot change in place from a
	// release of line from to version to, of the newer line to ("" when it
	// can), as a sentence saying what to do instead.
	AcrossLines func(c *Catalog, from, to Line, version string) string
}

var (
	registryMu sync.RWMutex
	registry   = map[examplev1.Engine]*Catalog{}
)

// Register makes c the catalog of c.Engine. It panics when that engine has one.
func Register(c Catalog) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[c.Engine]; dup {
		panic(fmt.Sprintf("catalog of engine %q registered twice", c.Engine))
	}
	registry[c.Engine] = &c
}

// Unregister removes the catalog of engine; for tests that register an engine
// of their own.
func Unregister(engine examplev1.Engine) {
	registryMu.Lock()
	defer registryMu.Unlock()
	delete(registry, engine)
}

// version is a parsed spec.version.
type version struct {
	line     int // index into Catalog.Lines
	floating bool
	release  int // the component after the line; 0 when floating
}

// maxComponentDigits bounds each number so it fits an int.
const maxComponentDigits = 9

func (c *Catalog) parse(v string) (version, error) {
	parts := strings.Split(v, ".")
	ok := len(parts) == c.LineParts || len(parts) == c.LineParts+1
	for _, p := range parts {
		ok = ok && isNumber(p)
	}
	if ok {
		name := strings.Join(parts[:c.LineParts], ".")
		for i, l := range c.Lines {
			if l.Name != name {
				continue
			}
			if len(parts) == c.LineParts {
				return version{line: i, floating: true}, nil
			}
			n, _ := strconv.Atoi(parts[c.LineParts])
			return version{line: i, release: n}, nil
		}
	}
	return version{}, &catalogError{kind: ErrUnsupportedVersion, msg: fmt.Sprintf(
		"unsupported %s version %q: supported versions are %s, written %s",
		c.Engine, v, strings.Join(Supported(c.Engine), ", "), c.Form)}
}

// isNumber accepts "0" and decimal numbers without a leading zero, up to
// maxComponentDigits digits: image tags are written that way, so "05" names
// no image.
func isNumber(s string) bool {
	if s == "" || len(s) > maxComponentDigits || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// compare orders two versions of one engine: by line, then by release, a
// floating version being the newest of its line.
func compare(a, b version) int {
	switch {
	case a.line != b.line:
		return a.line - b.line
	case a.floating && b.floating:
		return 0
	case a.floating:
		return 1
	case b.floating:
		return -1
	default:
		return a.release - b.release
	}
}

// Path names the lines from from to to, "6.0 → 7.0 → 8.0".
func (c *Catalog) Path(from, to Line) string {
	var names []string
	in := false
	for _, l := range c.Lines {
		in = in || l.Name == from.Name
		if in {
			names = append(names, l.Name)
		}
		if l.Name == to.Name {
			break
		}
	}
	return strings.Join(names, " → ")
}

// SeriesPath names every series in upgrade order, "8.0 → 8.4 → 9.x".
func (c *Catalog) SeriesPath() string {
	var names []string
	for i, l := range c.Lines {
		if i == 0 || l.Series != c.Lines[i-1].Series {
			names = append(names, l.SeriesName)
		}
	}
	return strings.Join(names, " → ")
}

// NewestInSeries returns the newest line of series, the best next step.
func (c *Catalog) NewestInSeries(series int) string {
	newest := ""
	for _, l := range c.Lines {
		if l.Series == series {
			newest = l.Name
		}
	}
	return newest
}

func catalogFor(engine examplev1.Engine) (*Catalog, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if c, ok := registry[engine]; ok {
		return c, nil
	}
	var names []string
	for _, e := range engineOrder() {
		names = append(names, string(e))
	}
	return nil, &catalogError{kind: ErrUnknownEngine, msg: fmt.Sprintf(
		"unknown engine %q: supported engines are %s", engine, strings.Join(names, ", "))}
}

// engineOrder is the order messages name the registered engines in: that of
// the API's list of spec.engine values, then any other, sorted. The caller
// holds registryMu.
func engineOrder() []examplev1.Engine {
	var out []examplev1.Engine
	for _, e := range example.SupportedEngines {
		if _, ok := registry[examplev1.Engine(e)]; ok {
			out = append(out, examplev1.Engine(e))
		}
	}
	var others []examplev1.Engine
	for e := range registry {
		if !slices.Contains(out, e) {
			others = append(others, e)
		}
	}
	slices.Sort(others)
	return append(out, others...)
}

// Day is 00:00 UTC of the date, as end-of-life dates are given.
func Day(year int, month time.Month, d int) time.Time {
	return time.Date(year, month, d, 0, 0, 0, 0, time.UTC)
}

// SingleLine makes a line that is a series of its own.
func SingleLine(name string, series int, endOfLife time.Time) Line {
	return Line{Name: name, Series: series, SeriesName: name, EndOfLife: endOfLife}
}
