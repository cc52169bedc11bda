package localcluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
)

func TestParseNodeImageTakesTheLineAndTheServersRelease(t *testing.T) {
	img, err := parseNodeImage([]string{"library/postgres:15", "library/postgres:15.18"})
	require.NoError(t, err)
	require.Equal(t, NodeImage{Engine: examplev1.EnginePostgreSQL, Line: "15", Release: "15.18", Image: "postgres:15"}, img)

	img, err = parseNodeImage([]string{"library/mysql:9.7", "library/mysql:9.7.0"})
	require.NoError(t, err)
	require.Equal(t, NodeImage{Engine: examplev1.EngineMySQL, Line: "9.7", Release: "9.7.0", Image: "mysql:9.7"}, img)
}

func TestParseNodeImageRefusesWhatTheCatalogDoesNotAccept(t *testing.T) {
	for _, c := range []struct {
		tags []string
		want string
	}{
		// A release the mirror ships that the catalog does not list: a Database asking for it
		// would be refused by admission.
		{[]string{"library/postgres:15", "library/postgres:15.99"}, `tag "library/postgres:15.99": postgresql "15.99" is not a published release`},
		// A line the catalog does not have.
		{[]string{"library/postgres:12", "library/postgres:12.20"}, `tag "library/postgres:12": unsupported postgresql version "12"`},
		{[]string{"library/postgres:15"}, "want one tag naming the release line and one the server's release"},
		{[]string{"library/postgres:15.18"}, "want one tag naming the release line and one the server's release"},
		{[]string{"library/postgres:15", "library/postgres:16.4"}, "the release 16.4 is not of the line 15"},
		{[]string{"library/postgres:15", "library/postgres:16"}, `tag "library/postgres:16": a second line tag`},
		{[]string{"library/postgres:15", "library/mysql:9.7"}, `tag "library/mysql:9.7" names another engine than "library/postgres:15"`},
		{[]string{"localcluster/pause:1"}, "is not an image of library/mysql or library/postgres"},
	} {
		_, err := parseNodeImage(c.tags)
		require.ErrorContains(t, err, c.want, "%q", c.tags)
	}
}

func TestReadNodeImagesNamesTheImageThatDoesNotMatchTheCatalog(t *testing.T) {
	dir := t.TempDir()
	write := func(name, tags string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".tags"), []byte(tags), 0o644))
	}
	write("postgres", "library/postgres:15\nlibrary/postgres:15.18\n")
	write("postgres14", "library/postgres:14\nlibrary/postgres:14.5\n")
	write("mysql", "library/mysql:9.7\nlibrary/mysql:9.7.0\n")
	images, err := readNodeImages(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"15.18", "14.5", "9.7.0"}, []string{images[0].Release, images[1].Release, images[2].Release})
	require.Equal(t, []string{"postgres:15", "postgres:14", "mysql:9.7"}, []string{images[0].Image, images[1].Image, images[2].Image})

	// The second PostgreSQL image is checked as the first is, and named when it does not match.
	write("postgres14", "library/postgres:14\nlibrary/postgres:14.99\n")
	_, err = readNodeImages(dir)
	require.ErrorContains(t, err, "the real node's postgres14 image does not match the version catalog (pkg/catalog): "+filepath.Join(dir, "postgres14.tags"))
	require.ErrorContains(t, err, "list the release in pkg/engine/postgresql/catalog.go")
	write("postgres14", "library/postgres:14\nlibrary/postgres:14.5\n")

	// Every release of the line the catalog lists is accepted.
	for _, r := range catalog.Releases(examplev1.EngineMySQL, "9.7") {
		write("mysql", "library/mysql:9.7\nlibrary/mysql:"+r+"\n")
		_, err := readNodeImages(dir)
		require.NoError(t, err, r)
	}

	write("mysql", "library/mysql:9.7\nlibrary/mysql:9.7.99\n")
	_, err = readNodeImages(dir)
	require.ErrorContains(t, err, "the real node's mysql image does not match the version catalog (pkg/catalog): "+filepath.Join(dir, "mysql.tags"))
	require.ErrorContains(t, err, `mysql "9.7.99" is not a published release`)
	require.ErrorContains(t, err, "list the release in pkg/engine/mysql/catalog.go")
}
