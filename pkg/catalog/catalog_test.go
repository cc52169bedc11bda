package catalog_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	example "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"

	// The engines register their catalogs.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

func date(year int, month time.Month, day int) time.Time {
	return time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
}

func TestLookupResolvesEveryWrittenFormToItsImageAndLine(t *testing.T) {
	tests := []struct {
		engine   example.Engine
		version  string
		line     string
		image    string
		floating bool
		eol      time.Time
	}{
		{example.EnginePostgreSQL, "14.5", "14", "postgres:14.5", false, date(2026, time.November, 12)},
		{example.EnginePostgreSQL, "14", "14", "postgres:14", true, date(2026, time.November, 12)},
		{example.EnginePostgreSQL, "13.0", "13", "postgres:13.0", false, date(2025, time.November, 13)},
		{example.EnginePostgreSQL, "18.1", "18", "postgres:18.1", false, date(2030, time.November, 14)},
		{example.EngineMySQL, "8.0", "8.0", "mysql:8.0", true, date(2026, time.April, 30)},
		{example.EngineMySQL, "8.0.36", "8.0", "mysql:8.0.36", false, date(2026, time.April, 30)},
		{example.EngineMySQL, "8.4", "8.4", "mysql:8.4", true, date(2032, time.April, 30)},
		{example.EngineMySQL, "8.4.2", "8.4", "mysql:8.4.2", false, date(2032, time.April, 30)},
		{example.EngineMySQL, "9.0", "9.0", "mysql:9.0", true, date(2024, time.October, 15)},
		{example.EngineMySQL, "9.5.0", "9.5", "mysql:9.5.0", false, date(2026, time.January, 20)},
		{example.EngineMySQL, "9.7", "9.7", "mysql:9.7", true, date(2034, time.April, 30)},
		{example.EngineMongoDB, "6.0", "6.0", "mongo:6.0", true, date(2025, time.July, 31)},
		{example.EngineMongoDB, "7.0.12", "7.0", "mongo:7.0.12", false, date(2027, time.August, 31)},
		{example.EngineMongoDB, "8.0", "8.0", "mongo:8.0", true, date(2029, time.October, 31)},
	}
	for _, tt := range tests {
		t.Run(string(tt.engine)+"/"+tt.version, func(t *testing.T) {
			r, err := catalog.Lookup(tt.engine, tt.version)
			require.NoError(t, err)
			require.Equal(t, catalog.Release{
				Engine:    tt.engine,
				Version:   tt.version,
				Line:      tt.line,
				Floating:  tt.floating,
				Image:     tt.image,
				EndOfLife: tt.eol,
			}, r)
		})
	}
}

func TestLookupRefusesVersionsThatNameNoImage(t *testing.T) {
	tests := []struct {
		engine  example.Engine
		version string
		listed  string // part of the supported list the error must show
	}{
		{example.EnginePostgreSQL, "12", "13.x, 14.x, 15.x, 16.x, 17.x, 18.x"},
		{example.EnginePostgreSQL, "19", "13.x"},
		{example.EnginePostgreSQL, "14.5.1", "14.x"},
		{example.EnginePostgreSQL, "latest", "14.x"},
		{example.EnginePostgreSQL, "14.", "14.x"},
		{example.EnginePostgreSQL, "14.05", "14.x"},
		{example.EnginePostgreSQL, "014", "14.x"},
		{example.EnginePostgreSQL, "", "14.x"},
		{example.EnginePostgreSQL, "14.9999999999", "14.x"},
		{example.EngineMySQL, "5.7", "8.0.x, 8.4.x, 9.0.x"},
		{example.EngineMySQL, "8", "8.4.x"},
		{example.EngineMySQL, "8.1", "8.4.x"},
		{example.EngineMySQL, "9.8", "9.7.x"},
		{example.EngineMySQL, "8.0.36.1", "8.0.x"},
		{example.EngineMySQL, "8.0-debian", "8.0.x"},
		{example.EngineMongoDB, "4.4", "6.0.x, 7.0.x, 8.0.x"},
		{example.EngineMongoDB, "7", "7.0.x"},
		{example.EngineMongoDB, "abc", "7.0.x"},
		{example.EngineMongoDB, "8.2", "8.0.x"},
	}
	for _, tt := range tests {
		t.Run(string(tt.engine)+"/"+tt.version, func(t *testing.T) {
			_, err := catalog.Lookup(tt.engine, tt.version)
			require.ErrorIs(t, err, catalog.ErrUnsupportedVersion)
			require.ErrorContains(t, err, `unsupported `+string(tt.engine)+` version "`+tt.version+`"`)
			require.ErrorContains(t, err, tt.listed)
		})
	}
}

func TestLookupRefusesUnknownEngine(t *testing.T) {
	_, err := catalog.Lookup("oracle", "19")
	require.ErrorIs(t, err, catalog.ErrUnknownEngine)
	require.EqualError(t, err, `unknown engine "oracle": supported engines are mysql, postgresql, mongodb`)
}

func TestPastEndOfLifeStartsOnTheEndOfLifeDate(t *testing.T) {
	r, err := catalog.Lookup(example.EnginePostgreSQL, "14.5")
	require.NoError(t, err)

	tests := []struct {
		now  time.Time
		past bool
	}{
		{date(2026, time.November, 11), false},
		{date(2026, time.November, 12).Add(-time.Nanosecond), false},
		{date(2026, time.November, 12), true},
		{date(2030, time.January, 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.now.Format(time.RFC3339Nano), func(t *testing.T) {
			require.Equal(t, tt.past, r.PastEndOfLife(tt.now))
		})
	}
}

func TestSupportedListsEveryLineOldestFirst(t *testing.T) {
	require.Equal(t, []string{"13.x", "14.x", "15.x", "16.x", "17.x", "18.x"}, catalog.Supported(example.EnginePostgreSQL))
	require.Equal(t, []string{"8.0.x", "8.4.x", "9.0.x", "9.1.x", "9.2.x", "9.3.x", "9.4.x", "9.5.x", "9.6.x", "9.7.x"}, catalog.Supported(example.EngineMySQL))
	require.Equal(t, []string{"6.0.x", "7.0.x", "8.0.x"}, catalog.Supported(example.EngineMongoDB))
	require.Nil(t, catalog.Supported("oracle"))
}

func TestLinesAreValidVersions(t *testing.T) {
	for _, engine := range []example.Engine{example.EngineMySQL, example.EnginePostgreSQL, example.EngineMongoDB} {
		lines := catalog.Lines(engine)
		require.Len(t, lines, len(catalog.Supported(engine)), engine)
		for _, l := range lines {
			r, err := catalog.Lookup(engine, l)
			require.NoError(t, err, "%s %s", engine, l)
			require.Equal(t, l, r.Line)
			require.True(t, r.Floating)
		}
	}
	require.Nil(t, catalog.Lines("oracle"))
}

func TestCheckUpgradeAllowsSafeInPlaceChanges(t *testing.T) {
	tests := []struct {
		name     string
		engine   example.Engine
		from, to string
	}{
		{"postgresql equal", example.EnginePostgreSQL, "14.5", "14.5"},
		{"postgresql minor upgrade", example.EnginePostgreSQL, "14.5", "14.6"},
		{"postgresql minor upgrade compares numbers not strings", example.EnginePostgreSQL, "14.9", "14.10"},
		{"postgresql pinned to floating line", example.EnginePostgreSQL, "14.5", "14"},
		{"mysql patch upgrade", example.EngineMySQL, "8.0.35", "8.0.36"},
		{"mysql pinned to floating series", example.EngineMySQL, "8.4.2", "8.4"},
		{"mysql 8.0 to 8.4", example.EngineMySQL, "8.0", "8.4"},
		{"mysql 8.0 patch to 8.4 patch", example.EngineMySQL, "8.0.36", "8.4.2"},
		{"mysql 8.4 to an innovation release", example.EngineMySQL, "8.4", "9.2"},
		{"mysql 8.4 to the 9.7 LTS", example.EngineMySQL, "8.4.2", "9.7.0"},
		{"mysql innovation to later innovation", example.EngineMySQL, "9.0", "9.5.1"},
		{"mysql floating innovation to the next one pinned", example.EngineMySQL, "9.2", "9.3.0"},
		{"mongodb patch upgrade", example.EngineMongoDB, "7.0.11", "7.0.12"},
		{"mongodb pinned to floating series", example.EngineMongoDB, "7.0.12", "7.0"},
		{"mongodb equal", example.EngineMongoDB, "8.0", "8.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, catalog.CheckUpgrade(tt.engine, tt.from, tt.to))
		})
	}
}

func TestCheckUpgradeRefusesUnsafeChangesWithActionableMessages(t *testing.T) {
	tests := []struct {
		name     string
		engine   example.Engine
		from, to string
		says     []string
	}{
		{
			name: "postgresql minor downgrade", engine: example.EnginePostgreSQL, from: "14.6", to: "14.5",
			says: []string{`cannot change postgresql from version "14.6" to "14.5" in place: downgrades are not safe`, `keep "14.6" or a later version`},
		},
		{
			name: "postgresql floating to pinned may downgrade", engine: example.EnginePostgreSQL, from: "14", to: "14.5",
			says: []string{`"14" follows the newest 14.x release, which may be newer than 14.5`, `keep "14"`},
		},
		{
			name: "postgresql major upgrade", engine: example.EnginePostgreSQL, from: "14.5", to: "15",
			says: []string{`a PostgreSQL 15 server refuses data files written by major version 14`, "pg_upgrade", "pg_dump", `new Database at version "15"`},
		},
		{
			name: "postgresql major downgrade", engine: example.EnginePostgreSQL, from: "16", to: "15.4",
			says: []string{"downgrades are not safe"},
		},
		{
			name: "mysql patch downgrade", engine: example.EngineMySQL, from: "8.0.36", to: "8.0.35",
			says: []string{"downgrades are not safe"},
		},
		{
			name: "mysql series downgrade", engine: example.EngineMySQL, from: "8.4", to: "8.0",
			says: []string{"downgrades are not safe"},
		},
		{
			name: "mysql innovation downgrade", engine: example.EngineMySQL, from: "9.5", to: "9.3",
			says: []string{"downgrades are not safe"},
		},
		{
			name: "mysql floating series to pinned may downgrade", engine: example.EngineMySQL, from: "8.4", to: "8.4.2",
			says: []string{`"8.4" follows the newest 8.4.x release`},
		},
		{
			name: "mysql skips a series", engine: example.EngineMySQL, from: "8.0.36", to: "9.2",
			says: []string{"one release series at a time (8.0 → 8.4 → 9.x)", `change the version to "8.4" first`, `then change it to "9.2"`},
		},
		{
			name: "mongodb major upgrade", engine: example.EngineMongoDB, from: "6.0", to: "7.0",
			says: []string{`featureCompatibilityVersion must first be set to "6.0" and then stepped one major release at a time (6.0 → 7.0)`, "mongodump"},
		},
		{
			name: "mongodb two majors", engine: example.EngineMongoDB, from: "6.0.14", to: "8.0",
			says: []string{"(6.0 → 7.0 → 8.0)"},
		},
		{
			name: "mongodb patch downgrade", engine: example.EngineMongoDB, from: "7.0.12", to: "7.0.11",
			says: []string{"downgrades are not safe"},
		},
		{
			name: "current version not in the catalog", engine: example.EnginePostgreSQL, from: "12", to: "13",
			says: []string{`cannot change postgresql from version "12" to "13" in place: the current version "12" is not in the catalog`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := catalog.CheckUpgrade(tt.engine, tt.from, tt.to)
			require.ErrorIs(t, err, catalog.ErrUnsafeChange)
			for _, s := range tt.says {
				require.ErrorContains(t, err, s)
			}
		})
	}
}

func TestCheckUpgradeRefusesUnknownTargetAndEngineWithLookupErrors(t *testing.T) {
	err := catalog.CheckUpgrade(example.EngineMySQL, "8.0", "5.7")
	require.ErrorIs(t, err, catalog.ErrUnsupportedVersion)

	err = catalog.CheckUpgrade("oracle", "19", "21")
	require.ErrorIs(t, err, catalog.ErrUnknownEngine)
}
