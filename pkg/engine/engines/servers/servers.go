// Package servers registers how the controller reaches the servers of every engine of the
// repository (engine.RegisterObserver), through their drivers, and the engines themselves
// (pkg/engine/engines).
package servers

import (
	// Each registers its Observer from its init function.
	_ "example.com/database-apiserver/pkg/engine/mongodb/mongoclient"
	_ "example.com/database-apiserver/pkg/engine/mysql/myclient"
	_ "example.com/database-apiserver/pkg/engine/postgresql/pgclient"

	_ "example.com/database-apiserver/pkg/engine/engines"
)
