package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A claim counts while its process runs; a claim of a process that is gone is removed, and so
// is a file whose name has no pid.
func TestLiveClaimsCountsRunningProcessesAndDropsTheRest(t *testing.T) {
	dir := t.TempDir()
	done := exec.Command("true")
	require.NoError(t, done.Run())
	claim := func(name string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		return path
	}
	mine := claim(fmt.Sprintf("%d-1.claim", os.Getpid()))
	mineAgain := claim(fmt.Sprintf("%d-2.claim", os.Getpid()))
	gone := claim(fmt.Sprintf("%d-1.claim", done.Process.Pid))
	nameless := claim("x-1.claim")
	other := claim("lock")

	live, err := liveClaims(dir)
	require.NoError(t, err)
	require.Equal(t, 2, live)
	for _, kept := range []string{mine, mineAgain, other} {
		require.FileExists(t, kept)
	}
	for _, removed := range []string{gone, nameless} {
		require.NoFileExists(t, removed)
	}
}
