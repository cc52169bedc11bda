package objectstore

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/database-apiserver/internal/pki"
	"example.com/database-apiserver/pkg/engine"
)

// fakeS3 answers the S3 requests Store sends, path-style, for bucket "backups": a
// ListObjectsV2 with delimiter "/" over keys, a GetObject (NoSuchKey for a missing key),
// and a DeleteObjects, which it records.
type fakeS3 struct {
	mu      sync.Mutex
	keys    map[string]string
	deleted []string
	// refuse makes DeleteObjects refuse every key (AccessDenied), as a locked bucket does.
	refuse bool
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/backups/")
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/backups/" && q.Has("list-type"):
		prefix, delimiter := q.Get("prefix"), q.Get("delimiter")
		var body strings.Builder
		body.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>backups</Name><IsTruncated>false</IsTruncated>`)
		seen := map[string]bool{}
		for _, k := range slices.Sorted(maps.Keys(f.keys)) {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			rest := strings.TrimPrefix(k, prefix)
			if i := strings.Index(rest, "/"); delimiter == "/" && i >= 0 {
				p := prefix + rest[:i+1]
				if !seen[p] {
					seen[p] = true
					body.WriteString("<CommonPrefixes><Prefix>" + p + "</Prefix></CommonPrefixes>")
				}
				continue
			}
			body.WriteString("<Contents><Key>" + k + "</Key><Size>" + strconv.Itoa(len(f.keys[k])) + "</Size></Contents>")
		}
		body.WriteString("</ListBucketResult>")
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(body.String()))
	case r.Method == http.MethodGet:
		v, ok := f.keys[key]
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>` + key + `</Key></Error>`))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(v)))
		w.Header().Set("Last-Modified", "Sat, 05 Dec 2026 03:00:41 GMT")
		w.Header().Set("ETag", `"0"`)
		_, _ = w.Write([]byte(v))
	case r.Method == http.MethodPost && q.Has("delete"):
		buf := new(strings.Builder)
		_, _ = io.Copy(buf, r.Body)
		var result strings.Builder
		result.WriteString(`<?xml version="1.0" encoding="UTF-8"?><DeleteResult>`)
		for _, part := range strings.Split(buf.String(), "<Key>")[1:] {
			k, _, _ := strings.Cut(part, "</Key>")
			if f.refuse {
				result.WriteString("<Error><Key>" + k + "</Key><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>")
				continue
			}
			delete(f.keys, k)
			f.deleted = append(f.deleted, k)
			result.WriteString("<Deleted><Key>" + k + "</Key></Deleted>")
		}
		result.WriteString("</DeleteResult>")
		_, _ = w.Write([]byte(result.String()))
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}

// newStore starts a TLS server of fake and returns a Store of it, trusting its certificate
// through Config.CA.
func newStore(t *testing.T, fake *fakeS3) *Store {
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	// httptest's certificate names 127.0.0.1 and example.com: ask for it by address.
	s, err := New(Config{Host: "127.0.0.1", Port: int32(port), Bucket: "backups", Region: "us-east-1",
		AccessKeyID: "AKIA", SecretAccessKey: "secret", CA: ca})
	require.NoError(t, err)
	return s
}

// List gives one level, Get an object or ErrObjectNotFound, DeleteAll every object under a
// prefix and none other.
func TestStore(t *testing.T) {
	fake := &fakeS3{keys: map[string]string{
		"db/ns/backup/ledger/backup.info":                         "[backup:current]\n",
		"db/ns/backup/ledger/20261205-030041F/backup.manifest":    "m",
		"db/ns/backup/ledger/20261205-030041F/pg_data/PG_VERSION": "15",
		"db/ns/backup/ledger/20261206-030041F/backup.manifest":    "m",
	}}
	s := newStore(t, fake)
	ctx := context.Background()

	got, err := s.List(ctx, "db/ns/backup/ledger/")
	require.NoError(t, err)
	require.Equal(t, []string{"db/ns/backup/ledger/20261205-030041F/", "db/ns/backup/ledger/20261206-030041F/", "db/ns/backup/ledger/backup.info"}, got)

	data, err := s.Get(ctx, "db/ns/backup/ledger/backup.info")
	require.NoError(t, err)
	require.Equal(t, "[backup:current]\n", string(data))
	_, err = s.Get(ctx, "db/ns/backup/ledger/backup.info.copy")
	require.ErrorIs(t, err, engine.ErrObjectNotFound)

	require.NoError(t, s.DeleteAll(ctx, "db/ns/backup/ledger/20261205-030041F/"))
	require.ElementsMatch(t, []string{"db/ns/backup/ledger/20261205-030041F/backup.manifest", "db/ns/backup/ledger/20261205-030041F/pg_data/PG_VERSION"}, fake.deleted)
	require.Len(t, fake.keys, 2)
}

// A CA that holds no certificate is refused; a store whose certificate the CA does not sign
// is an error, never read.
func TestStoreVerifiesTheCertificate(t *testing.T) {
	_, err := New(Config{Host: "s3.example.com", Port: 443, Bucket: "b", CA: []byte("not PEM")})
	require.ErrorContains(t, err, "no PEM certificate")

	srv := httptest.NewTLSServer(&fakeS3{keys: map[string]string{}})
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, _ := strconv.Atoi(u.Port())
	other, err := pki.NewCA(pki.Template{CommonName: "another CA", Validity: time.Hour})
	require.NoError(t, err)
	ca := other.CertPEM()
	s, err := New(Config{Host: "127.0.0.1", Port: int32(port), Bucket: "backups", AccessKeyID: "a", SecretAccessKey: "b", CA: ca})
	require.NoError(t, err)
	_, err = s.List(context.Background(), "")
	require.ErrorContains(t, err, "certificate")
}

// A store that refuses to delete is an error naming the object and the store's answer,
// everything kept, and no goroutine of the delete outlives it.
func TestStoreDeleteRefused(t *testing.T) {
	fake := &fakeS3{refuse: true, keys: map[string]string{}}
	for i := range 30 {
		fake.keys[fmt.Sprintf("db/ns/backup/ledger/20261205-030041F/pg_data/%02d", i)] = "x"
	}
	s := newStore(t, fake)
	before := runtime.NumGoroutine()
	for range 5 {
		err := s.DeleteAll(context.Background(), "db/ns/backup/ledger/20261205-030041F/")
		require.ErrorContains(t, err, "deleting db/ns/backup/ledger/20261205-030041F/pg_data/")
		require.ErrorContains(t, err, "the store answered AccessDenied: Access Denied.")
	}
	require.Len(t, fake.keys, 30)
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, 5*time.Second, 50*time.Millisecond,
		"goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// A store's message is kept to a bound, cut on a rune boundary.
func TestTruncate(t *testing.T) {
	require.Equal(t, "short", truncate("short", 10))
	require.Equal(t, "ab...", truncate("abcdef", 2))
	require.Equal(t, "a...", truncate("aéé", 2))
}
