package example

import "example.com/database-apiserver/pkg/storagesize"

// CanonicalStorage returns spec.storage in its canonical form (storagesize.Canonical):
// without leading zeros, so equal sizes are equal strings.
func CanonicalStorage(storage string) string { return storagesize.Canonical(storage) }
