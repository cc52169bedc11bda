package mongodb_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// runMongoDBSetup runs scripts/mongodb-setup.sh with KEYFILE_SOURCE source and KEYFILE dest,
// and returns its output and error.
func runMongoDBSetup(t *testing.T, source, dest string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "scripts/mongodb-setup.sh")
	cmd.Env = append(os.Environ(), "KEYFILE_SOURCE="+source, "KEYFILE="+dest)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The setup copies the keyfile, readable by the server's group in the Secret volume, to a file
// only its owner may read, as mongod requires; a copy left by an earlier start of the Pod is
// replaced, not refused.
func TestMongoDBSetupCopiesTheKeyFileOwnerReadOnly(t *testing.T) {
	dir := t.TempDir()
	source, dest := filepath.Join(dir, "keyfile"), filepath.Join(dir, "key", "keyfile")
	require.NoError(t, os.MkdirAll(filepath.Dir(dest), 0o755))
	require.NoError(t, os.WriteFile(source, []byte("SHAREDKEY234"), 0o440))

	out, err := runMongoDBSetup(t, source, dest)
	require.NoError(t, err, out)
	info, err := os.Stat(dest)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o400), info.Mode().Perm())
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	require.Equal(t, "SHAREDKEY234", string(got))

	require.NoError(t, os.Chmod(source, 0o600))
	require.NoError(t, os.WriteFile(source, []byte("ROTATEDKEY567"), 0o440))
	out, err = runMongoDBSetup(t, source, dest)
	require.NoError(t, err, out)
	got, err = os.ReadFile(dest)
	require.NoError(t, err)
	require.Equal(t, "ROTATEDKEY567", string(got))
	info, err = os.Stat(dest)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o400), info.Mode().Perm())
}

// A missing or empty keyfile stops the Pod before the server, with the reason: mongod would
// otherwise fail on it with a less direct message.
func TestMongoDBSetupRefusesAMissingKeyFile(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "keyfile.copy")
	out, err := runMongoDBSetup(t, filepath.Join(dir, "absent"), dest)
	require.Error(t, err)
	require.Contains(t, out, "is missing or empty")
	require.NoFileExists(t, dest)

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o440))
	out, err = runMongoDBSetup(t, empty, dest)
	require.Error(t, err)
	require.Contains(t, out, "is missing or empty")
}
