package localcluster

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"

	// The engines register their catalogs.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

// NodeImage is an engine image of the real node, as hack/build-node-images.sh tags it: once
// with its release line and once with the release of the server it holds.
type NodeImage struct {
	Engine examplev1.Engine
	// Line is the release line ("15", "9.7"): a Database's spec.version that runs this image.
	Line string
	// Release is the server's release ("15.18", "9.7.0"), the version the server itself
	// reports, which is whatever the Debian mirror shipped when the image was built: a
	// Database asking for exactly this release runs this image.
	Release string
	// Image is the line's image as a Pod names it ("postgres:15").
	Image string
}

// nodeImageEngines are the engines of the real node's images, by repository.
var nodeImageEngines = map[string]examplev1.Engine{
	"library/postgres": examplev1.EnginePostgreSQL,
	"library/mysql":    examplev1.EngineMySQL,
}

// nodeImageNames are the real node's engine images (hack/build-node-images.sh), by the name of
// their tarball and .tags file, the engine's main image first (the one RealNodeImage returns).
var nodeImageNames = []string{"postgres", "postgres14", "mysql"}

// readNodeImages reads the engine images' .tags files in dir (nodeImageNames) and
// checks each against the version catalog (pkg/catalog), which admission applies to every
// Database: the line must be one of the catalog's, and the release one the catalog lists as
// published, else a Database asking for the server's own release is refused, or one asking
// for another release lands on the simulated node. The error says which image and tag do not
// match and what to do.
func readNodeImages(dir string) ([]NodeImage, error) {
	var images []NodeImage
	for _, name := range nodeImageNames {
		path := filepath.Join(dir, name+".tags")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		img, err := parseNodeImage(strings.Fields(string(b)))
		if err != nil {
			return nil, fmt.Errorf("the real node's %s image does not match the version catalog (pkg/catalog): %s: %w; list the release in pkg/engine/%s/catalog.go, or build the image (hack/build-node-images.sh) from a mirror that ships a listed one",
				name, path, err, nodeImageEngines["library/"+strings.TrimRight(name, "0123456789")])
		}
		images = append(images, img)
	}
	return images, nil
}

// parseNodeImage reads an engine image's tags ("library/postgres:15",
// "library/postgres:15.18"): exactly one names a line of the catalog and one a release of
// that line the catalog lists as published.
func parseNodeImage(tags []string) (NodeImage, error) {
	var img NodeImage
	for _, tag := range tags {
		repo, version, ok := strings.Cut(tag, ":")
		engine, known := nodeImageEngines[repo]
		switch {
		case !ok || !known:
			return NodeImage{}, fmt.Errorf("tag %q is not an image of %s", tag, strings.Join(slices.Sorted(maps.Keys(nodeImageEngines)), " or "))
		case img.Engine != "" && engine != img.Engine:
			return NodeImage{}, fmt.Errorf("tag %q names another engine than %q", tag, tags[0])
		}
		img.Engine = engine
		release, err := catalog.Lookup(engine, version)
		if err == nil && !release.Floating {
			err = catalog.CheckRelease(engine, version, nil)
		}
		if err != nil {
			return NodeImage{}, fmt.Errorf("tag %q: %w", tag, err)
		}
		switch {
		case release.Floating && img.Line == "":
			img.Line, img.Image = version, strings.TrimPrefix(repo, "library/")+":"+version
		case !release.Floating && img.Release == "":
			img.Release = version
		default:
			return NodeImage{}, fmt.Errorf("tag %q: a second %s tag", tag, map[bool]string{true: "line", false: "release"}[release.Floating])
		}
	}
	switch {
	case img.Line == "" || img.Release == "":
		return NodeImage{}, fmt.Errorf("tags %q: want one tag naming the release line and one the server's release", tags)
	case !strings.HasPrefix(img.Release, img.Line+"."):
		return NodeImage{}, fmt.Errorf("tags %q: the release %s is not of the line %s", tags, img.Release, img.Line)
	}
	return img, nil
}

// RealNodeImage returns the real node's main image of engine (the first of nodeImageNames),
// once the real node runs.
func (c *Cluster) RealNodeImage(engine examplev1.Engine) (NodeImage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node == nil || c.nodePending {
		return NodeImage{}, false
	}
	for _, img := range c.node.engineImages {
		if img.Engine == engine {
			return img, true
		}
	}
	return NodeImage{}, false
}
