package mysql

import (
	"fmt"
	"strconv"
	"strings"

	"example.com/database-apiserver/pkg/apis/example"
	"example.com/database-apiserver/pkg/apis/example/validation"
)

// ReplicationPatch is the first MySQL 8.0 patch release with the statements the controller
// sets up replicas with (CHANGE REPLICATION SOURCE TO, 8.0.23:
// https://dev.mysql.com/doc/relnotes/mysql/8.0/en/news-8-0-23.html).
const ReplicationPatch = 23

// ValidationRules: a spec of more than one replica pinned to an 8.0 release before
// ReplicationPatch ("8.0.22") cannot replicate. Series ("8.0") and other lines replicate.
func (Engine) ValidationRules() validation.EngineRules {
	return validation.EngineRules{ReplicationRelease: func(spec *example.DatabaseSpec) string {
		patch, found := strings.CutPrefix(spec.Version, "8.0.")
		n, err := strconv.Atoi(patch)
		if !found || err != nil || n >= ReplicationPatch {
			return ""
		}
		return fmt.Sprintf("mysql %s cannot replicate: more than one replica needs 8.0.%d or later (CHANGE REPLICATION SOURCE TO), 8.4 or 9.x; or replicas: 1",
			spec.Version, ReplicationPatch)
	}}
}
