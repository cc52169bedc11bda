package mongodb

import (
	"fmt"
	"time"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
)

// Catalog is MongoDB's: the official mongo image, one line per major release.
func (Engine) Catalog() catalog.Catalog {
	return catalog.Catalog{
		Engine:    examplev1.EngineMongoDB,
		Image:     "mongo",
		LineParts: 2,
		Form:      `SERIES or SERIES.PATCH (e.g. "7.0" or "7.0.12")`,
		// MongoDB Software Lifecycle Schedules
		// (https://www.mongodb.com/legal/support-policy/lifecycles), MongoDB
		// Server major releases.
		Lines: []catalog.Line{
			catalog.SingleLine("6.0", 6, catalog.Day(2025, time.July, 31)),
			catalog.SingleLine("7.0", 7, catalog.Day(2027, time.August, 31)),
			catalog.SingleLine("8.0", 8, catalog.Day(2029, time.October, 31)),
		},
		// MongoDB Server release notes
		// (https://www.mongodb.com/docs/manual/release-notes/): patch releases
		// roughly monthly; 7.0.10 and 7.0.13 were never released.
		Published: map[string][]int{
			"6.0": catalog.Span(0, 25),
			"7.0": catalog.Span(0, 26, 10, 13),
			"8.0": catalog.Span(0, 18),
		},
		// A major change is refused: featureCompatibilityVersion has to be
		// stepped one major at a time first
		// (https://www.mongodb.com/docs/manual/reference/command/setFeatureCompatibilityVersion/).
		AcrossLines: func(c *catalog.Catalog, from, to catalog.Line, version string) string {
			return fmt.Sprintf("featureCompatibilityVersion must first be set to %q and then stepped one major release at a time (%s) with setFeatureCompatibilityVersion, with a binary upgrade before each step, which changing the image does not do; create a new Database at version %q and move the data with mongodump and mongorestore",
				from.Name, c.Path(from, to), version)
		},
	}
}
