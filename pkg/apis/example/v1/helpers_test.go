package v1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A primary takes writes only when its server last answered as the primary and no check
// since found it not taking them.
func TestPrimaryTakesWrites(t *testing.T) {
	since := metav1.Now()
	for _, tc := range []struct {
		name   string
		status DatabaseStatus
		want   bool
	}{
		{"answered as the primary", DatabaseStatus{Primary: "a-0", Members: []DatabaseMember{{Name: "a-0", Role: MemberRolePrimary}, {Name: "a-1", Role: MemberRoleReplica}}}, true},
		{"no primary named", DatabaseStatus{Members: []DatabaseMember{{Name: "a-0", Role: MemberRolePrimary}}}, false},
		{"never answered", DatabaseStatus{Primary: "a-0", Members: []DatabaseMember{{Name: "a-0"}}}, false},
		{"no members reported", DatabaseStatus{Primary: "a-0"}, false},
		{"answered as a replica", DatabaseStatus{Primary: "a-0", Members: []DatabaseMember{{Name: "a-0", Role: MemberRoleReplica}}}, false},
		{"another member answered as the primary", DatabaseStatus{Primary: "a-0", Members: []DatabaseMember{{Name: "a-0"}, {Name: "a-1", Role: MemberRolePrimary}}}, false},
		{"found not taking writes", DatabaseStatus{Primary: "a-0", PrimaryLastWritableTime: &since, Members: []DatabaseMember{{Name: "a-0", Role: MemberRolePrimary}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, PrimaryTakesWrites(&Database{Status: tc.status}))
		})
	}
}
