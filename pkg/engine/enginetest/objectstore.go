// Package enginetest holds fakes of pkg/engine's interfaces, for tests.
package enginetest

import (
	"context"
	"maps"
	"slices"
	"strings"

	"example.com/database-apiserver/pkg/engine"
)

// ObjectStore is an in-memory engine.ObjectStore: object key -> content.
type ObjectStore map[string][]byte

var _ engine.ObjectStore = ObjectStore{}

// List returns what S3's ListObjects with delimiter "/" returns under prefix: the keys
// directly under it and the common prefixes of the deeper ones, deduplicated and sorted.
func (s ObjectStore) List(_ context.Context, prefix string) ([]string, error) {
	seen := map[string]bool{}
	for key := range s {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		if i := strings.Index(rest, "/"); i >= 0 {
			seen[prefix+rest[:i+1]] = true
		} else {
			seen[key] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// Get returns the content of key, engine.ErrObjectNotFound when there is none.
func (s ObjectStore) Get(_ context.Context, key string) ([]byte, error) {
	data, ok := s[key]
	if !ok {
		return nil, engine.ErrObjectNotFound
	}
	return data, nil
}

// DeleteAll deletes every key under prefix.
func (s ObjectStore) DeleteAll(_ context.Context, prefix string) error {
	for key := range s {
		if strings.HasPrefix(key, prefix) {
			delete(s, key)
		}
	}
	return nil
}

// Keys are the store's keys, sorted.
func (s ObjectStore) Keys() []string { return slices.Sorted(maps.Keys(s)) }
