package catalog_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
)

func TestCheckReleaseAcceptsPublishedReleasesAndLines(t *testing.T) {
	tests := []struct {
		engine  examplev1.Engine
		version string
	}{
		{examplev1.EnginePostgreSQL, "16"},
		{examplev1.EnginePostgreSQL, "16.0"},
		{examplev1.EnginePostgreSQL, "16.4"},
		{examplev1.EnginePostgreSQL, "14.5"},
		{examplev1.EnginePostgreSQL, "18.1"},
		{examplev1.EngineMySQL, "8.0"},
		{examplev1.EngineMySQL, "8.0.11"},
		{examplev1.EngineMySQL, "8.0.36"},
		{examplev1.EngineMySQL, "8.0.39"},
		{examplev1.EngineMySQL, "8.4.2"},
		{examplev1.EngineMySQL, "9.0.1"},
		{examplev1.EngineMySQL, "9.5.0"},
		{examplev1.EngineMySQL, "9.7.4"},
		{examplev1.EngineMongoDB, "7.0"},
		{examplev1.EngineMongoDB, "7.0.12"},
		{examplev1.EngineMongoDB, "6.0.0"},
		{examplev1.EngineMongoDB, "8.0.4"},
	}
	for _, tt := range tests {
		t.Run(string(tt.engine)+"/"+tt.version, func(t *testing.T) {
			require.NoError(t, catalog.CheckRelease(tt.engine, tt.version, nil))
		})
	}
}

func TestCheckReleaseRefusesReleasesNeverPublished(t *testing.T) {
	tests := []struct {
		engine  examplev1.Engine
		version string
		listed  string // the line's published releases, as the message writes them
	}{
		{examplev1.EnginePostgreSQL, "16.99", "the 16 line has 16.0 to 16.15, and \"16\" alone follows its newest release"},
		{examplev1.EnginePostgreSQL, "13.24", "the 13 line has 13.0 to 13.23"},
		{examplev1.EngineMongoDB, "7.0.99", "the 7.0 line has 7.0.0 to 7.0.9, 7.0.11 to 7.0.12, 7.0.14 to 7.0.26"},
		{examplev1.EngineMongoDB, "7.0.999999999", "7.0.14 to 7.0.26"},
		{examplev1.EngineMongoDB, "7.0.10", "7.0.0 to 7.0.9, 7.0.11"},
		{examplev1.EngineMySQL, "8.0.10", "the 8.0 line has 8.0.11 to 8.0.28, 8.0.30 to 8.0.37, 8.0.39 to 8.0.46"},
		{examplev1.EngineMySQL, "8.0.29", "8.0.30 to 8.0.37"},
		{examplev1.EngineMySQL, "8.4.1", "the 8.4 line has 8.4.0, 8.4.2 to 8.4.11"},
		{examplev1.EngineMySQL, "9.0.0", "the 9.0 line has 9.0.1, and \"9.0\" alone"},
		{examplev1.EngineMySQL, "9.1.1", "the 9.1 line has 9.1.0,"},
	}
	for _, tt := range tests {
		t.Run(string(tt.engine)+"/"+tt.version, func(t *testing.T) {
			err := catalog.CheckRelease(tt.engine, tt.version, nil)
			require.ErrorIs(t, err, catalog.ErrUnpublishedRelease)
			require.False(t, errors.Is(err, catalog.ErrUnsupportedVersion), "the line is in the catalog")
			require.ErrorContains(t, err, string(tt.engine)+` "`+tt.version+`" is not a published release`)
			require.ErrorContains(t, err, tt.listed)
		})
	}
}

func TestCheckReleaseReturnsLookupsErrorOutsideTheCatalog(t *testing.T) {
	require.ErrorIs(t, catalog.CheckRelease(examplev1.EnginePostgreSQL, "19.0", nil), catalog.ErrUnsupportedVersion)
	require.ErrorIs(t, catalog.CheckRelease(examplev1.EngineMySQL, "5.7.44", nil), catalog.ErrUnsupportedVersion)
	require.ErrorIs(t, catalog.CheckRelease("oracle", "19", nil), catalog.ErrUnknownEngine)
}

func TestCheckReleaseAcceptsAddedReleasesAndListsThem(t *testing.T) {
	added := catalog.Published{}
	added.Add(examplev1.EnginePostgreSQL, "18.10")
	added.Add(examplev1.EnginePostgreSQL, "18.6")
	added.Add(examplev1.EngineMongoDB, "8.0.50")

	require.NoError(t, catalog.CheckRelease(examplev1.EnginePostgreSQL, "18.6", added))
	require.NoError(t, catalog.CheckRelease(examplev1.EnginePostgreSQL, "18.10", added))
	require.NoError(t, catalog.CheckRelease(examplev1.EngineMongoDB, "8.0.50", added))

	err := catalog.CheckRelease(examplev1.EnginePostgreSQL, "18.7", added)
	require.ErrorIs(t, err, catalog.ErrUnpublishedRelease)
	require.ErrorContains(t, err, "the 18 line has 18.0 to 18.5, 18.6, 18.10,", "added releases follow the catalog's, in order")
	err = catalog.CheckRelease(examplev1.EngineMySQL, "8.0.50", added)
	require.ErrorIs(t, err, catalog.ErrUnpublishedRelease, "a release added for mongodb is not one of mysql")
	require.NotContains(t, err.Error(), "8.0.46, 8.0.50", "other engines' additions are not listed")
}

// Every line of the catalog has published releases, listed oldest first,
// each a release of its line as Lookup parses it, and its newest is what
// NewestReleases reports.
func TestReleasesCoverEveryLineInOrder(t *testing.T) {
	for _, engine := range []examplev1.Engine{examplev1.EngineMySQL, examplev1.EnginePostgreSQL, examplev1.EngineMongoDB} {
		var newest []string
		for _, line := range catalog.Lines(engine) {
			releases := catalog.Releases(engine, line)
			require.NotEmpty(t, releases, "%s %s", engine, line)
			last := -1
			for _, v := range releases {
				r, err := catalog.Lookup(engine, v)
				require.NoError(t, err, v)
				require.Equal(t, line, r.Line, v)
				require.False(t, r.Floating, v)
				require.True(t, catalog.IsRelease(engine, v), v)
				patch, err := strconv.Atoi(strings.TrimPrefix(v, line+"."))
				require.NoError(t, err, v)
				require.Greater(t, patch, last, "%s %s: ascending, no repeats", engine, v)
				last = patch
			}
			newest = append(newest, releases[len(releases)-1])
		}
		require.Equal(t, newest, catalog.NewestReleases(engine), "%s", engine)
	}
	require.Nil(t, catalog.Releases(examplev1.EnginePostgreSQL, "19"))
	require.Nil(t, catalog.NewestReleases("oracle"))
}

func TestIsReleaseAcceptsOnlyPinnedReleasesOfKnownLines(t *testing.T) {
	require.True(t, catalog.IsRelease(examplev1.EnginePostgreSQL, "18.99"), "published or not")
	require.True(t, catalog.IsRelease(examplev1.EngineMySQL, "8.4.12"))
	require.False(t, catalog.IsRelease(examplev1.EnginePostgreSQL, "18"), "a line alone")
	require.False(t, catalog.IsRelease(examplev1.EnginePostgreSQL, "19.0"), "a line outside the catalog")
	require.False(t, catalog.IsRelease(examplev1.EngineMySQL, "8.4.x"))
	require.False(t, catalog.IsRelease("oracle", "19.3"))
}
