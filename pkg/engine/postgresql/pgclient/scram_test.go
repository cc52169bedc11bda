package pgclient

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each verifier is what PostgreSQL 15.18 stored (SELECT rolpassword FROM pg_authid) for a role
// created with password_encryption = 'scram-sha-256' and PASSWORD set to the string: the
// verifier computed here with the same salt and iterations must be the same.
func TestSCRAMVerifierIsPostgreSQLs(t *testing.T) {
	for _, tc := range []struct{ name, password, verifier string }{
		{"ASCII", "pencil",
			"SCRAM-SHA-256$4096:zQ0fEGJL+lDnMH6c6zLzlQ==$LexD87dUkwp3nqhY/w83sUADZrVG1WAuNV9llEM6mPw=:lw43Z0rju8ly7w/IBIJIw/EAvZ9I09jHmzV3YwPJcxA="},
		{"ASCII with control characters, which SASLprep would refuse", "tab\there\x01",
			"SCRAM-SHA-256$4096:VtFrMIagnTea2rpi0dCq1w==$5+ETrjX/07lu1sfhkCtSZMZX7S1cLgLCIfc2rYs7Mvo=:lGZwxbpXO5Kgz1arYDVG1WvStR9ADya7dywagulLp6g="},
		{"a soft hyphen mapped to nothing", "I\u00adX",
			"SCRAM-SHA-256$4096:iUM3OV6Yy9xogU4cKVSxZg==$f4wPtvZKWS/XDhiR4IIERr4wuqAGVNUDBirFLzWu+zQ=:lObB2iezJkl8nWPDjeUW7eGvC15jTfEfIgoXRnsG5Hw="},
		{"NFKC", "\u2168",
			"SCRAM-SHA-256$4096:GI4bMrpUWv4BRGYgraJcqg==$AdoViQl2aE+jpfiwSg+JC3D+I5Fp3k99vhXGpqIK+xo=:9tbK0lklXkPIthjGdnns4ik7ERvjdCL433SNcdd/VK8="},
		{"non-ASCII spaces, zero width space included, mapped to a space", "a\u00a0b\u200bc",
			"SCRAM-SHA-256$4096:OAxFVbdI11ZMWSm7sbC0qw==$qztEcJeHI+H3ol+F5Fekap0zhUeS5197iDZRB7AuP+4=:+M6UVXPATQxJe0/MYVL4aR/YcVBy0DiMIkv+gzhJxZo="},
		{"a prohibited character: unchanged", "a\u0007\u00e9",
			"SCRAM-SHA-256$4096:0TXmu+rPpYxJFq8Zva8KAg==$k+slQsyaxmMWd/PtPOGDwxxGPh90HrJsFTVLJf8NqS4=:p88tA4IeOYxjCb4lZuft1Hc5mmt5Ra0ufgU24OSbXWA="},
		{"right-to-left with left-to-right: unchanged", "\u0627a\u0628",
			"SCRAM-SHA-256$4096:ztpaqjAu4vOK80InknvN9A==$W6HANsHcz890YWn0O2N1XtEj0Tf8K+RLV6b99RLYq1E=:CTqDvErViuWBFdlQPYFaVfwBqgv573tLuzoRt5K4osQ="},
		{"empty once mapped: unchanged", "\u00ad",
			"SCRAM-SHA-256$4096:g996ZlfiBJlqEoif/W5pvQ==$iq0l9VctJYBG49ju9qm7GQ6jdBzPuHaXhhr0ulH3ZSc=:V4mmXMn57eJ1I+SZOU77sbx1O5Ru2mAlOyOm0LvSftA="},
		{"right-to-left only", "\u0627\u0628",
			"SCRAM-SHA-256$4096:JmactnQc/2DOwYCICDUyBg==$M+aHeCFMZKOkdl5dTubiCVdS4CXasEcJGblk5+ZoI8w=:VdhcncKX5bMWS1uK2fqRVO5CgGT+OMjeWRy9uDCV9qM="},
		{"composition and a ligature", "cafe\u0301 \ufb01",
			"SCRAM-SHA-256$4096:XbGJdEP5ifkuvX4TaCN8Vg==$w3N5VnFTWFmwQn/MaRDIvQiHoC5NKwv9+wzhYHiDnqs=:RVPC7EOlEK3tWf00WYWDW8wbOy/AH8jw36EdyGslEo8="},
		{"unassigned in Unicode 3.2: unchanged", "x\u0221y",
			"SCRAM-SHA-256$4096:Gw6nN6n4fWuJKy3cOngs6w==$L8DJ5vLOArxirAr+yYLaRH3hYaAOqqBPe81I5Js9hDg=:TLjFNGQh6iKiBE3MfJ0M/oCM8HXzl1Yfs5on1JfU0rU="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head, _, ok := strings.Cut(strings.TrimPrefix(tc.verifier, "SCRAM-SHA-256$"), "$")
			require.True(t, ok)
			iterations, salt64, _ := strings.Cut(head, ":")
			n, err := strconv.Atoi(iterations)
			require.NoError(t, err)
			salt, err := base64.StdEncoding.DecodeString(salt64)
			require.NoError(t, err)
			got, err := scramVerifier(tc.password, salt, n)
			require.NoError(t, err)
			require.Equal(t, tc.verifier, got)
		})
	}
}

// RFC 7677 section 3's exchange (user "user", password "pencil"): the server signature it
// shows is HMAC(ServerKey, AuthMessage), and its client proof XOR HMAC(StoredKey, AuthMessage)
// is a ClientKey whose SHA-256 is StoredKey.
func TestSCRAMVerifierMatchesRFC7677(t *testing.T) {
	salt, err := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	require.NoError(t, err)
	v, err := scramVerifier("pencil", salt, 4096)
	require.NoError(t, err)
	keys := strings.Split(v[strings.LastIndex(v, "$")+1:], ":")
	require.Len(t, keys, 2)
	storedKey, err := base64.StdEncoding.DecodeString(keys[0])
	require.NoError(t, err)
	serverKey, err := base64.StdEncoding.DecodeString(keys[1])
	require.NoError(t, err)

	const authMessage = "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	require.Equal(t, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
		base64.StdEncoding.EncodeToString(hmacSHA256(serverKey, authMessage)))

	proof, err := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	require.NoError(t, err)
	clientKey := hmacSHA256(storedKey, authMessage)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	sum := sha256.Sum256(clientKey)
	require.True(t, hmac.Equal(storedKey, sum[:]), "H(ClientKey) = StoredKey")
}

// Each call draws a new salt: two verifiers of one password differ, and carry
// SCRAMIterations and a salt of SCRAMSaltBytes.
func TestSCRAMVerifierSaltsEachCall(t *testing.T) {
	a, err := SCRAMVerifier("pencil")
	require.NoError(t, err)
	b, err := SCRAMVerifier("pencil")
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.NotContains(t, a, "pencil")
	require.Regexp(t, `^SCRAM-SHA-256\$4096:[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{43}=:[A-Za-z0-9+/]{43}=$`, a)
}
