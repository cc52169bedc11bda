// Package engines registers every engine of the repository (engine.Register): a binary that
// imports it runs PostgreSQL, MySQL and MongoDB Databases.
package engines

import (
	// Each registers itself from its init function.
	_ "example.com/database-apiserver/pkg/engine/mongodb"
	_ "example.com/database-apiserver/pkg/engine/mysql"
	_ "example.com/database-apiserver/pkg/engine/postgresql"
)
