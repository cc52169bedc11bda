package servers_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/database-apiserver/pkg/engine"
	_ "example.com/database-apiserver/pkg/engine/engines/servers"
)

// Every registered engine that replicates has its Observer registered, of the shape its
// recipe says: an engine.ReplicaSet when its members elect their primary, an
// engine.Replicator when replicas stream from a primary the controller picks.
func TestEveryEngineThatReplicatesHasAnObserverOfItsShape(t *testing.T) {
	observers := engine.Observers()
	require.NotEmpty(t, engine.Registered())
	for _, name := range engine.Registered() {
		r, _ := engine.For(name)
		o, ok := observers[name]
		require.Equal(t, r.Replicates(), ok, name)
		switch {
		case r.ReplicaSet:
			require.Implements(t, (*engine.ReplicaSet)(nil), o, name)
		case r.Replicates():
			require.Implements(t, (*engine.Replicator)(nil), o, name)
		}
	}
	for name := range observers {
		require.Contains(t, engine.Registered(), name, "an Observer of an engine not registered")
	}
}
