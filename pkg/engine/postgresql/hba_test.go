package postgresql_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/postgresql"
)

// hbaRules is the lines of a pg_hba.conf that are not comments, split into fields.
func hbaRules(hba string) [][]string {
	var rules [][]string
	for _, line := range strings.Split(hba, "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && !strings.HasPrefix(fields[0], "#") {
			rules = append(rules, fields)
		}
	}
	return rules
}

// pg_hba.conf, read top to bottom as PostgreSQL does: the socket trusted; the superuser from
// the controller's sources only when there are some; the replication role's one ordinary
// session, pg_rewind's, to the database postgres from the namespace's names, then no other;
// everyone else by password; replication connections for the replication role only, from
// the namespace's names. Only the replication role's lines name addresses by DNS name, and
// the superuser's lines come before them.
func TestHBAAdmitsTheReplicationRolesRewindFromTheNamespaceOnly(t *testing.T) {
	db := &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production"}}
	d := engine.Desired{Recipe: postgresql.Engine{}.Recipe(), ClusterDomain: "cluster.local"}
	require.Equal(t, [][]string{
		{"local", "all", "all", "trust"},
		{"host", "postgres", "replicator", ".production.svc.cluster.local", "scram-sha-256"},
		{"host", "all", "replicator", "all", "reject"},
		{"host", "all", "all", "all", "scram-sha-256"},
		{"host", "replication", "replicator", ".production.svc.cluster.local", "scram-sha-256"},
	}, hbaRules(postgresql.HBA(db, d)))

	d.SuperuserSources = []netip.Prefix{netip.MustParsePrefix("10.245.0.1/32")}
	require.Equal(t, [][]string{
		{"local", "all", "all", "trust"},
		{"host", "all", "postgres", "10.245.0.1/32", "scram-sha-256"},
		{"host", "all", "postgres", "all", "reject"},
		{"host", "postgres", "replicator", ".production.svc.cluster.local", "scram-sha-256"},
		{"host", "all", "replicator", "all", "reject"},
		{"host", "all", "all", "all", "scram-sha-256"},
		{"host", "replication", "replicator", ".production.svc.cluster.local", "scram-sha-256"},
	}, hbaRules(postgresql.HBA(db, d)))
}
