package mongodb_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/database-apiserver/pkg/engine/mongodb"
)

func TestValidKeyFile(t *testing.T) {
	for key, valid := range map[string]bool{
		"SHAREDKEY234":                 true,
		"abc+/=\n":                     true,
		"ab cd ef":                     true,
		"short":                        false,
		"":                             false,
		"not-base64!":                  false,
		strings.Repeat("A", 1024):      true,
		strings.Repeat("A", 1025):      false,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ23": true,
	} {
		require.Equal(t, valid, mongodb.ValidKeyFile([]byte(key)), "%q", key)
	}
}
