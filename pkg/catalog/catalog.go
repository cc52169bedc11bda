// Package catalog is the engine version catalog: which values of
// spec.version name a real container image for each engine, when each release
// line reaches its vendor's end of life, and which version changes a running
// database can take in place.
//
// Images are the official ones (docker-library postgres, mysql, mongo), whose
// tags are the vendors' version numbers; end-of-life dates and upgrade rules
// come from each vendor's support policy and upgrade documentation, cited
// where they are used. The catalog never reads the clock: callers pass "now"
// to Release.PastEndOfLife.
package catalog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// Errors the catalog wraps, for errors.Is; the messages themselves are
// sentences meant for the user.
var (
	// ErrUnknownEngine: the engine is none of the catalog's (mysql, postgresql, mongodb).
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
	// Line is the release line: the major for postgresql ("14"), the release
	// series for mysql ("8.4", "9.2") and mongodb ("7.0").
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
// forms, as the images are tagged: postgresql MAJOR or MAJOR.MINOR ("14", "14.5") for majors 13 to 18;
// mysql SERIES or SERIES.PATCH ("8.4", "8.4.2") for 8.0, 8.4 and 9.0 to 9.7;
// mongodb SERIES or SERIES.PATCH ("7.0", "7.0.12") for 6.0, 7.0 and 8.0.
// Components are decimal without leading zeros. Lookup does not check that a
// pinned release was published: CheckRelease does.
//
// The error wraps ErrUnknownEngine for an engine outside
// the catalog's engines, and ErrUnsupportedVersion, listing the supported
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
	l := c.lines[v.line]
	return Release{
		Engine:    engine,
		Version:   version,
		Line:      l.name,
		Floating:  v.floating,
		Image:     c.image + ":" + version,
		EndOfLife: l.endOfLife,
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
	out := make([]string, len(c.lines))
	for i, l := range c.lines {
		out[i] = l.name + ".x"
	}
	return out
}

// Lines returns the release line names of engine, oldest first ("13" … "18";
// "8.0", "8.4", "9.0" … "9.7"; "6.0", "7.0", "8.0"). Each is itself a valid
// version. It returns nil for an unknown engine.
func Lines(engine examplev1.Engine) []string {
	c, err := catalogFor(engine)
	if err != nil {
		return nil
	}
	out := make([]string, len(c.lines))
	for i, l := range c.lines {
		out[i] = l.name
	}
	return out
}

// CheckUpgrade returns nil when a running database of engine can change from
// version from to version to in place, and otherwise an error, wrapping
// ErrUnsafeChange, that says why and what to do instead. Rules, from each
// engine's upgrade documentation:
//
//   - equal versions, and minor or patch upgrades within a line, are safe;
//   - any downgrade is refused, across lines or within one;
//   - mysql moves one release series at a time, 8.0 → 8.4 → 9.x (mysqld
//     upgrades its data itself); 8.0 → 9.x is refused;
//   - a postgresql major change is refused: the server refuses data files of
//     another major, so pg_upgrade or a dump and restore is needed;
//   - a mongodb major change is refused: featureCompatibilityVersion has to be
//     stepped one major at a time first.
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
			from, c.lines[f.line].name, to, from, to)
	case cmp > 0:
		return refuse("downgrades are not safe, because the newer server may already have rewritten the data files and system tables; keep %q or a later version, or restore a backup into a new Database at version %q",
			from, to)
	}
	if f.line == t.line {
		return nil
	}

	fl, tl := c.lines[f.line], c.lines[t.line]
	switch engine {
	case examplev1.EnginePostgreSQL:
		return refuse("a PostgreSQL %s server refuses data files written by major version %s; convert the data with pg_upgrade, or dump it (pg_dump) and restore it (pg_restore) into a new Database at version %q",
			tl.name, fl.name, to)
	case examplev1.EngineMongoDB:
		return refuse("featureCompatibilityVersion must first be set to %q and then stepped one major release at a time (%s) with setFeatureCompatibilityVersion, with a binary upgrade before each step, which changing the image does not do; create a new Database at version %q and move the data with mongodump and mongorestore",
			fl.name, c.path(f.line, t.line), to)
	}
	// mysql: one release series at a time.
	if tl.series-fl.series > 1 {
		next := c.newestInSeries(fl.series + 1)
		return refuse("MySQL upgrades its data one release series at a time (%s); change the version to %q first, wait until the Database is Ready, then change it to %q",
			c.seriesPath(), next, to)
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

// line is one release line of an engine.
type line struct {
	// name is the line as written in spec.version: "14", "8.4", "7.0".
	name string
	// series groups lines that upgrade into each other freely (mysql's 9.x
	// innovation and LTS releases); consecutive series are one upgrade step
	// apart. Only mysql uses more than one line per series.
	series int
	// seriesName is how messages name the series: "8.0", "8.4", "9.x".
	seriesName string
	// endOfLife is the vendor's published end-of-life date.
	endOfLife time.Time
}

// engineCatalog is what the catalog knows about one engine.
type engineCatalog struct {
	engine examplev1.Engine
	// image is the Docker Hub repository; the tag is spec.version.
	image string
	// lineParts is the number of dot-separated components naming a line:
	// 1 for postgresql ("14"), 2 for mysql and mongodb ("8.4", "7.0"). One
	// more component pins a release in the line.
	lineParts int
	// form says how versions are written, for error messages.
	form string
	// lines, oldest (and lowest) first.
	lines []line
}

// version is a parsed spec.version.
type version struct {
	line     int // index into engineCatalog.lines
	floating bool
	release  int // the component after the line; 0 when floating
}

// maxComponentDigits bounds each number so it fits an int.
const maxComponentDigits = 9

func (c *engineCatalog) parse(v string) (version, error) {
	parts := strings.Split(v, ".")
	ok := len(parts) == c.lineParts || len(parts) == c.lineParts+1
	for _, p := range parts {
		ok = ok && isNumber(p)
	}
	if ok {
		name := strings.Join(parts[:c.lineParts], ".")
		for i, l := range c.lines {
			if l.name != name {
				continue
			}
			if len(parts) == c.lineParts {
				return version{line: i, floating: true}, nil
			}
			n, _ := strconv.Atoi(parts[c.lineParts])
			return version{line: i, release: n}, nil
		}
	}
	return version{}, &catalogError{kind: ErrUnsupportedVersion, msg: fmt.Sprintf(
		"unsupported %s version %q: supported versions are %s, written %s",
		c.engine, v, strings.Join(Supported(c.engine), ", "), c.form)}
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

// path names the lines from index from to index to, "6.0 → 7.0 → 8.0".
func (c *engineCatalog) path(from, to int) string {
	names := make([]string, 0, to-from+1)
	for _, l := range c.lines[from : to+1] {
		names = append(names, l.name)
	}
	return strings.Join(names, " → ")
}

// seriesPath names every series in upgrade order, "8.0 → 8.4 → 9.x".
func (c *engineCatalog) seriesPath() string {
	var names []string
	for i, l := range c.lines {
		if i == 0 || l.series != c.lines[i-1].series {
			names = append(names, l.seriesName)
		}
	}
	return strings.Join(names, " → ")
}

// newestInSeries returns the newest line of series, the best next step.
func (c *engineCatalog) newestInSeries(series int) string {
	newest := ""
	for _, l := range c.lines {
		if l.series == series {
			newest = l.name
		}
	}
	return newest
}

func catalogFor(engine examplev1.Engine) (*engineCatalog, error) {
	for _, c := range catalogs {
		if c.engine == engine {
			return c, nil
		}
	}
	names := make([]string, len(engineOrder))
	for i, e := range engineOrder {
		names[i] = string(e)
	}
	return nil, &catalogError{kind: ErrUnknownEngine, msg: fmt.Sprintf(
		"unknown engine %q: supported engines are %s", engine, strings.Join(names, ", "))}
}

// engineOrder is the order messages name the engines in, that of the API's list of
// spec.engine values.
var engineOrder = []examplev1.Engine{examplev1.EngineMySQL, examplev1.EnginePostgreSQL, examplev1.EngineMongoDB}

func day(year int, month time.Month, d int) time.Time {
	return time.Date(year, month, d, 0, 0, 0, 0, time.UTC)
}

// single makes a line that is a series of its own, as every postgresql and
// mongodb line and mysql 8.0 and 8.4 are.
func single(name string, series int, endOfLife time.Time) line {
	return line{name: name, series: series, seriesName: name, endOfLife: endOfLife}
}

var catalogs = []*engineCatalog{
	{
		engine:    examplev1.EnginePostgreSQL,
		image:     "postgres",
		lineParts: 1,
		form:      `MAJOR or MAJOR.MINOR (e.g. "14" or "14.5")`,
		// PostgreSQL Versioning Policy (https://www.postgresql.org/support/versioning/):
		// each major is supported for five years after its first release,
		// ending with a final minor release on the date listed there.
		lines: []line{
			single("13", 13, day(2025, time.November, 13)),
			single("14", 14, day(2026, time.November, 12)),
			single("15", 15, day(2027, time.November, 11)),
			single("16", 16, day(2028, time.November, 9)),
			single("17", 17, day(2029, time.November, 8)),
			single("18", 18, day(2030, time.November, 14)),
		},
	},
	{
		engine:    examplev1.EngineMySQL,
		image:     "mysql",
		lineParts: 2,
		form:      `SERIES or SERIES.PATCH (e.g. "8.4" or "8.4.2")`,
		// Oracle Lifetime Support Policy for Oracle Technology Products
		// (https://www.oracle.com/us/support/library/lifetime-support-technology-069183.pdf):
		// 8.0 and the LTS series (8.4, 9.7) end with Extended Support, which
		// Oracle gives as a month (we take its last day). Innovation releases
		// (9.0 … 9.6) are supported only until the next release's GA
		// (https://dev.mysql.com/doc/refman/9.7/en/mysql-releases.html), the
		// date used here.
		lines: []line{
			single("8.0", 0, day(2026, time.April, 30)),
			single("8.4", 1, day(2032, time.April, 30)),
			{name: "9.0", series: 2, seriesName: "9.x", endOfLife: day(2024, time.October, 15)},
			{name: "9.1", series: 2, seriesName: "9.x", endOfLife: day(2025, time.January, 21)},
			{name: "9.2", series: 2, seriesName: "9.x", endOfLife: day(2025, time.April, 15)},
			{name: "9.3", series: 2, seriesName: "9.x", endOfLife: day(2025, time.July, 22)},
			{name: "9.4", series: 2, seriesName: "9.x", endOfLife: day(2025, time.October, 21)},
			{name: "9.5", series: 2, seriesName: "9.x", endOfLife: day(2026, time.January, 20)},
			{name: "9.6", series: 2, seriesName: "9.x", endOfLife: day(2026, time.April, 21)},
			{name: "9.7", series: 2, seriesName: "9.x", endOfLife: day(2034, time.April, 30)},
		},
	},
	{
		engine:    examplev1.EngineMongoDB,
		image:     "mongo",
		lineParts: 2,
		form:      `SERIES or SERIES.PATCH (e.g. "7.0" or "7.0.12")`,
		// MongoDB Software Lifecycle Schedules
		// (https://www.mongodb.com/legal/support-policy/lifecycles), MongoDB
		// Server major releases.
		lines: []line{
			single("6.0", 6, day(2025, time.July, 31)),
			single("7.0", 7, day(2027, time.August, 31)),
			single("8.0", 8, day(2029, time.October, 31)),
		},
	},
}
