package mysql

import (
	"fmt"
	"time"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
)

// Catalog is MySQL's: the official mysql image, one line per release series,
// the innovation releases of 9.x one series.
func (Engine) Catalog() catalog.Catalog {
	return catalog.Catalog{
		Engine:    examplev1.EngineMySQL,
		Image:     "mysql",
		LineParts: 2,
		Form:      `SERIES or SERIES.PATCH (e.g. "8.4" or "8.4.2")`,
		// Oracle Lifetime Support Policy for Oracle Technology Products
		// (https://www.oracle.com/us/support/library/lifetime-support-technology-069183.pdf):
		// 8.0 and the LTS series (8.4, 9.7) end with Extended Support, which
		// Oracle gives as a month (we take its last day). Innovation releases
		// (9.0 … 9.6) are supported only until the next release's GA
		// (https://dev.mysql.com/doc/refman/9.7/en/mysql-releases.html), the
		// date used here.
		Lines: []catalog.Line{
			catalog.SingleLine("8.0", 0, catalog.Day(2026, time.April, 30)),
			catalog.SingleLine("8.4", 1, catalog.Day(2032, time.April, 30)),
			{Name: "9.0", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2024, time.October, 15)},
			{Name: "9.1", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2025, time.January, 21)},
			{Name: "9.2", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2025, time.April, 15)},
			{Name: "9.3", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2025, time.July, 22)},
			{Name: "9.4", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2025, time.October, 21)},
			{Name: "9.5", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2026, time.January, 20)},
			{Name: "9.6", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2026, time.April, 21)},
			{Name: "9.7", Series: 2, SeriesName: "9.x", EndOfLife: catalog.Day(2034, time.April, 30)},
		},
		// MySQL release notes (https://dev.mysql.com/doc/relnotes/mysql/): 8.0's
		// first GA release is 8.0.11; 8.0.29, 8.0.38, 8.4.1 and 9.0.0 were
		// withdrawn by Oracle (an on-disk format bug, a crash at restart with many
		// tables) and replaced by the next release; each innovation series
		// (9.0 to 9.6) has a single release, the LTS series one each quarter; 9.7
		// up to 9.7.4, the release Debian sid's mysql-9.7 ships in December 2026
		// (the 9.7 manual's "What Is New" names it).
		Published: map[string][]int{
			"8.0": catalog.Span(11, 46, 29, 38),
			"8.4": catalog.Span(0, 11, 1),
			"9.0": {1},
			"9.1": {0},
			"9.2": {0},
			"9.3": {0},
			"9.4": {0},
			"9.5": {0},
			"9.6": {0},
			"9.7": catalog.Span(0, 4),
		},
		// One release series at a time, 8.0 → 8.4 → 9.x: mysqld upgrades its data
		// itself (https://dev.mysql.com/doc/refman/8.4/en/upgrade-paths.html).
		AcrossLines: func(c *catalog.Catalog, from, to catalog.Line, version string) string {
			if to.Series-from.Series <= 1 {
				return ""
			}
			return fmt.Sprintf("MySQL upgrades its data one release series at a time (%s); change the version to %q first, wait until the Database is Ready, then change it to %q",
				c.SeriesPath(), c.NewestInSeries(from.Series+1), version)
		},
	}
}
