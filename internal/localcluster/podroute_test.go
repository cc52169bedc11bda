package localcluster

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A claim counts while a cluster holds its file locked, in this process or another; a claim
// nobody holds (its process died) is stale and removed; other files are left alone.
func TestPodRouteClaimsCountsHeldLocksAndRemovesStaleOnes(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		return path
	}
	hold := func(path string) *os.File {
		f, err := os.Open(path)
		require.NoError(t, err)
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
		return f
	}
	first, second := hold(file("1-a.claim")), hold(file("1-b.claim"))
	defer second.Close()
	stale := file("2-c.claim")
	lock := file("lock")

	held, staleCount, err := podRouteClaims(dir)
	require.NoError(t, err)
	require.Equal(t, 2, held)
	require.Equal(t, 1, staleCount)
	require.NoFileExists(t, stale)
	require.FileExists(t, lock)

	require.NoError(t, first.Close()) // its cluster stopped or died without removing it
	held, staleCount, err = podRouteClaims(dir)
	require.NoError(t, err)
	require.Equal(t, 1, held)
	require.Equal(t, 1, staleCount)
	require.NoFileExists(t, filepath.Join(dir, "1-a.claim"))
	require.FileExists(t, filepath.Join(dir, "1-b.claim"))
}
