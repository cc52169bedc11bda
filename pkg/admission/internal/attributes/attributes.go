// Package attributes picks out, from admission attributes, the requests our
// plugins judge: writes of the databases resource itself.
package attributes

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"

	"example.com/database-apiserver/pkg/apis/example"
)

// databases is the resource our plugins act on: databases.example.com.
var databases = example.Resource("databases")

// Databases returns the Database a request writes (obj) and, on update, the
// stored one it replaces (old; nil on create). Both are nil when the request
// is about another resource or a subresource of databases (status, scale):
// those carry other objects or are not the user's spec to judge.
//
// The error is a 400 BadRequest when the request names databases but carries
// something other than the internal *example.Database, which means the
// server is wired wrongly.
func Databases(a admission.Attributes) (obj, old *example.Database, err error) {
	if a.GetResource().GroupResource() != databases || a.GetSubresource() != "" {
		return nil, nil, nil
	}
	obj, ok := a.GetObject().(*example.Database)
	if !ok {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s: expected an internal *example.Database object, got %T", databases, a.GetObject()))
	}
	if a.GetOperation() != admission.Update {
		return obj, nil, nil
	}
	old, ok = a.GetOldObject().(*example.Database)
	if !ok {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s: expected an internal *example.Database old object, got %T", databases, a.GetOldObject()))
	}
	return obj, old, nil
}
