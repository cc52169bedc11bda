// Package objectstore reads and deletes objects of an S3-compatible store with minio-go, as
// the API server does to serve the backups a store holds (engine.ObjectStore).
package objectstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"example.com/database-apiserver/pkg/engine"
)

// MaxObjectBytes bounds what Get reads of one object: a pgBackRest index of a stanza with
// the most backups the retention keeps is a few kilobytes.
const MaxObjectBytes = 16 << 20

// Config is how to reach one store.
type Config struct {
	// Host and Port are the endpoint's (HTTPS); Bucket and Region spec.backup.s3's.
	Host   string
	Port   int32
	Bucket string
	Region string
	// AccessKeyID and SecretAccessKey are the keys of the store's Secret.
	AccessKeyID, SecretAccessKey string
	// CA is PEM, the CAs to verify the store by; empty: the system's.
	CA []byte
	// Resolver resolves Host; nil: the system's.
	Resolver *net.Resolver
}

// Store is one bucket of an S3-compatible store, reached with path-style requests (as the
// backup tools reach it), over a connection per request: the API server opens a Store for
// each request it serves and keeps none.
type Store struct {
	client *minio.Client
	bucket string
}

// New returns the Store of cfg. It fails on a CA that holds no PEM certificate.
func New(cfg Config) (*Store, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cfg.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CA) {
			return nil, errors.New("the store's CA holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Resolver: cfg.Resolver}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		// A Store serves one request: no connection outlives it.
		DisableKeepAlives: true,
	}
	client, err := minio.New(net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Secure:       true,
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    transport,
		MaxRetries:   1,
	})
	if err != nil {
		return nil, err
	}
	return &Store{client: client, bucket: cfg.Bucket}, nil
}

var _ engine.ObjectStore = (*Store)(nil)

// List returns the keys and the next levels' prefixes directly under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if o.Err != nil {
			return nil, describe(o.Err)
		}
		keys = append(keys, o.Key)
	}
	// S3 answers the objects and the deeper prefixes in two lists.
	slices.Sort(keys)
	return keys, nil
}

// Get returns the object key's content, at most MaxObjectBytes of it; a larger object is an
// error.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	o, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, describe(err)
	}
	defer o.Close()
	data, err := io.ReadAll(io.LimitReader(o, MaxObjectBytes+1))
	if err != nil {
		return nil, describe(err)
	}
	if len(data) > MaxObjectBytes {
		return nil, fmt.Errorf("object %s is larger than %d bytes", key, MaxObjectBytes)
	}
	return data, nil
}

// DeleteAll deletes every object under prefix, in batches of the S3 API's bulk delete. On
// the first object the store refuses to delete, it stops listing and returns that error,
// once minio-go has reported every batch it sent.
func (s *Store) DeleteAll(ctx context.Context, prefix string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objects := make(chan minio.ObjectInfo)
	listErr := make(chan error, 1)
	go func() {
		defer close(objects)
		for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				listErr <- describe(o.Err)
				return
			}
			select {
			case objects <- o:
			case <-ctx.Done():
				return
			}
		}
	}()
	var failed error
	// Every result is read: minio-go's sender waits for each to be taken.
	for e := range s.client.RemoveObjects(ctx, s.bucket, objects, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && failed == nil {
			failed = fmt.Errorf("deleting %s: %w", e.ObjectName, describe(e.Err))
			cancel()
		}
	}
	if failed != nil {
		return failed
	}
	select {
	case err := <-listErr:
		return err
	default:
		return ctx.Err()
	}
}

// maxMessage bounds how much of a store's error message is kept, in bytes: a store or a
// proxy before it may answer a whole page.
const maxMessage = 200

// truncate is text cut to at most n bytes, on a rune boundary, marked "..." when cut.
func truncate(text string, n int) string {
	if len(text) <= n {
		return text
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n] + "..."
}

// describe turns the store's "no such key" answer into engine.ErrObjectNotFound and keeps
// the store's error code and message otherwise.
func describe(err error) error {
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case minio.NoSuchKey:
		return fmt.Errorf("%w: %s", engine.ErrObjectNotFound, resp.Key)
	case "":
		return err
	default:
		return fmt.Errorf("the store answered %s: %s", resp.Code, truncate(resp.Message, maxMessage))
	}
}
