package storagesize_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/database-apiserver/pkg/storagesize"
)

func TestParseReturnsWholeGibibytes(t *testing.T) {
	tests := []struct {
		storage string
		want    int64
	}{
		{"100Gi", 100},
		{"1Gi", 1},
		{"0Gi", 0},
		{"000Gi", 0},
		{"0100Gi", 100},
		{"8589934591Gi", storagesize.MaxGi},
	}
	for _, tt := range tests {
		t.Run(tt.storage, func(t *testing.T) {
			got, err := storagesize.Parse(tt.storage)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseRefusesOtherForms(t *testing.T) {
	tests := []struct {
		storage string
		says    string
	}{
		{"100GB", `does not match ^[0-9]+Gi$`},
		{"100G", `does not match`},
		{"100Mi", `does not match`},
		{"1.5Gi", `does not match`},
		{"-1Gi", `does not match`},
		{"Gi", `does not match`},
		{"", `does not match`},
		{" 10Gi", `does not match`},
		{"8589934592Gi", `exceeds 8589934591Gi`},
		{"99999999999999999999999Gi", `exceeds 8589934591Gi`},
	}
	for _, tt := range tests {
		t.Run(tt.storage, func(t *testing.T) {
			_, err := storagesize.Parse(tt.storage)
			require.ErrorContains(t, err, tt.says)
		})
	}
}

func TestCanonicalDropsLeadingZerosOnly(t *testing.T) {
	for in, want := range map[string]string{
		"100Gi":                              "100Gi",
		"0100Gi":                             "100Gi",
		"00Gi":                               "0Gi",
		strings.Repeat("0", 1000) + "1Gi":    "1Gi",
		"100GB":                              "100GB",
		"99999999999999999999999999999999Gi": "99999999999999999999999999999999Gi",
		"":                                   "",
	} {
		require.Equal(t, want, storagesize.Canonical(in), "input %q", in)
	}
}
