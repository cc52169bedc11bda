package storage

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
)

type userAgentKey struct{}

// WithUserAgent returns a copy of parent that carries userAgent, the User-Agent header of
// its request: the field manager of a write that names none (managerOrUserAgent).
func WithUserAgent(parent context.Context, userAgent string) context.Context {
	return context.WithValue(parent, userAgentKey{}, userAgent)
}

// userAgentFrom returns the User-Agent WithUserAgent put in ctx, "" when none.
func userAgentFrom(ctx context.Context) string {
	ua, _ := ctx.Value(userAgentKey{}).(string)
	return ua
}

// managerOrUserAgent returns the field manager of a write, as k8s.io/apiserver's handlers
// name it: the fieldManager option when set, otherwise the User-Agent up to its first "/"
// ("kubectl/v1.37.2 (linux/amd64)" is "kubectl"), without unprintable characters and cut to
// at most validation.FieldManagerMaxLength bytes.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
