package postgresql

import (
	"fmt"
	"time"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
)

// Catalog is PostgreSQL's: the official postgres image, one line per major.
func (Engine) Catalog() catalog.Catalog {
	return catalog.Catalog{
		Engine:    examplev1.EnginePostgreSQL,
		Image:     "postgres",
		LineParts: 1,
		Form:      `MAJOR or MAJOR.MINOR (e.g. "14" or "14.5")`,
		// PostgreSQL Versioning Policy (https://www.postgresql.org/support/versioning/):
		// each major is supported for five years after its first release,
		// ending with a final minor release on the date listed there.
		Lines: []catalog.Line{
			catalog.SingleLine("13", 13, catalog.Day(2025, time.November, 13)),
			catalog.SingleLine("14", 14, catalog.Day(2026, time.November, 12)),
			catalog.SingleLine("15", 15, catalog.Day(2027, time.November, 11)),
			catalog.SingleLine("16", 16, catalog.Day(2028, time.November, 9)),
			catalog.SingleLine("17", 17, catalog.Day(2029, time.November, 8)),
			catalog.SingleLine("18", 18, catalog.Day(2030, time.November, 14)),
		},
		// PostgreSQL release notes (https://www.postgresql.org/docs/release/):
		// MAJOR.0 each September, then minor releases every February, May, August
		// and November, plus out-of-cycle ones; a major's last minor release comes
		// out at its end of life. Published up to November 2026.
		Published: map[string][]int{
			"13": catalog.Span(0, 23),
			"14": catalog.Span(0, 24),
			"15": catalog.Span(0, 19),
			"16": catalog.Span(0, 15),
			"17": catalog.Span(0, 11),
			"18": catalog.Span(0, 5),
		},
		// A major change is refused: the server refuses data files of another
		// major (https://www.postgresql.org/docs/current/upgrading.html).
		AcrossLines: func(_ *catalog.Catalog, from, to catalog.Line, version string) string {
			return fmt.Sprintf("a PostgreSQL %s server refuses data files written by major version %s; convert the data with pg_upgrade, or dump it (pg_dump) and restore it (pg_restore) into a new Database at version %q",
				to.Name, from.Name, version)
		},
	}
}
