package pgclient

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/xdg-go/stringprep"
	"golang.org/x/text/unicode/norm"
)

// SCRAMIterations and SCRAMSaltBytes are what PostgreSQL itself uses for a verifier it
// computes: 4096 iterations (fixed before PostgreSQL 16, then scram_iterations' default,
// https://www.postgresql.org/docs/current/runtime-config-connection.html#GUC-SCRAM-ITERATIONS)
// and a 16-byte random salt.
const (
	SCRAMIterations = 4096
	SCRAMSaltBytes  = 16
)

// SCRAMVerifier is password as PostgreSQL stores it for SCRAM-SHA-256 authentication, with a
// fresh random salt of SCRAMSaltBytes and SCRAMIterations: a role given it as its PASSWORD
// authenticates with password, and the server never sees password itself
// (https://www.postgresql.org/docs/current/sql-createrole.html: a password string already in
// SCRAM-encrypted format is stored as it is, whatever password_encryption says).
func SCRAMVerifier(password string) (string, error) {
	salt := make([]byte, SCRAMSaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	return scramVerifier(password, salt, SCRAMIterations)
}

// scramVerifier is "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>", each of salt,
// StoredKey and ServerKey in standard base64 with padding, where (RFC 5802 section 3 with
// SHA-256, RFC 7677):
//
//	SaltedPassword = PBKDF2-HMAC-SHA-256(saslPrep(password), salt, iterations, 32 bytes)
//	StoredKey      = SHA-256(HMAC-SHA-256(SaltedPassword, "Client Key"))
//	ServerKey      = HMAC-SHA-256(SaltedPassword, "Server Key")
//
// which is PostgreSQL's scram_build_secret (src/common/scram-common.c).
func scramVerifier(password string, salt []byte, iterations int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, saslPrep(password), salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	clientKey := hmacSHA256(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := hmacSHA256(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return "SCRAM-SHA-256$" + strconv.Itoa(iterations) + ":" + b64(salt) + "$" + b64(storedKey[:]) + ":" + b64(serverKey), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// saslPrep is the password PostgreSQL hashes for password, as its pg_saslprep decides
// (src/common/saslprep.c), so that a verifier made here authenticates the password every
// libpq-based client sends:
//   - pure ASCII (any byte below 0x80, control characters included): unchanged;
//   - not valid UTF-8: unchanged;
//   - else SASLprep (RFC 4013): non-ASCII spaces (RFC 3454 table C.1.2) mapped to " ", then
//     the characters of table B.1 removed, then NFKC. When the mapped string (before
//     NFKC, as PostgreSQL checks it) is empty, holds a prohibited character (tables C.1.2,
//     C.2.1, C.2.2, C.3 to C.9) or one unassigned in Unicode 3.2 (table A.1), or breaks the
//     bidirectional rule of RFC 3454 section 6 (tables D.1 and D.2): unchanged.
//
// NFKC comes from golang.org/x/text, whose Unicode version is newer than 3.2; a character
// assigned in 3.2 (any other is refused above) normalises alike in every version since 4.1
// (https://www.unicode.org/policies/stability_policy.html#Normalization).
func saslPrep(password string) string {
	raw := password
	ascii := true
	for _, b := range []byte(password) {
		if b >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii || !utf8.ValidString(password) {
		return raw
	}
	var mapped []rune
	for _, r := range password {
		if stringprep.TableC1_2.Contains(r) {
			mapped = append(mapped, ' ')
		} else if _, nothing := stringprep.TableB1.Map(r); !nothing {
			mapped = append(mapped, r)
		}
	}
	if len(mapped) == 0 {
		return raw
	}
	prohibited := []stringprep.Set{
		stringprep.TableC1_2, stringprep.TableC2_1, stringprep.TableC2_2, stringprep.TableC3,
		stringprep.TableC4, stringprep.TableC5, stringprep.TableC6, stringprep.TableC7,
		stringprep.TableC8, stringprep.TableC9, stringprep.TableA1,
	}
	randAL, l := false, false
	for _, r := range mapped {
		for _, set := range prohibited {
			if set.Contains(r) {
				return raw
			}
		}
		randAL = randAL || stringprep.TableD1.Contains(r)
		l = l || stringprep.TableD2.Contains(r)
	}
	if randAL && (l || !stringprep.TableD1.Contains(mapped[0]) || !stringprep.TableD1.Contains(mapped[len(mapped)-1])) {
		return raw
	}
	return norm.NFKC.String(string(mapped))
}
