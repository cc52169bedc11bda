package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/database-apiserver/pkg/engine"
)

func TestParseBackupReport(t *testing.T) {
	for message, want := range map[string]time.Time{
		"firstRecoverableTime=1764892805\n":           time.Date(2025, 12, 5, 0, 0, 5, 0, time.UTC),
		"other=1\n  firstRecoverableTime=1764892805 ": time.Date(2025, 12, 5, 0, 0, 5, 0, time.UTC),
		"":                                         {},
		"firstRecoverableTime=":                    {},
		"firstRecoverableTime=soon":                {},
		"firstRecoverableTime=-5":                  {},
		"firstRecoverableTime=0":                   {},
		"ERROR: [082]: no backup set":              {},
		"firstrecoverabletime=1764892805":          {},
		"firstRecoverableTime 1764892805\n":        {},
		"firstRecoverableTime=253402300799":        time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		"firstRecoverableTime=253402300800":        {}, // 10000-01-01: no RFC 3339, no JSON
		"firstRecoverableTime=9223372036854775807": {},
		"firstRecoverableTime=9223372036854775808": {},
	} {
		require.Equal(t, want, engine.ParseBackupReport(message).FirstRecoverableTime, "%q", message)
	}
}
