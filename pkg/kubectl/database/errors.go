package database

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requestError is an error the API answered to one request, with the RBAC verb and resource
// (or resource/subresource) that request needed, so a refusal can say what to ask for.
type requestError struct {
	err       error
	verb      string
	resource  string
	namespace string
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// onRequest wraps err, the answer to a request that needed verb on resource in namespace;
// nil stays nil.
func onRequest(err error, verb, resource, namespace string) error {
	if err == nil {
		return nil
	}
	return &requestError{err: err, verb: verb, resource: resource, namespace: namespace}
}

// printError writes err as kubectl does (k8s.io/kubectl's StandardErrorMessage): an API
// status as "Error from server (Reason): message", a missing login as "error: You must be
// logged in to the server (message)", a refused connection naming the host, anything else as
// "error: message". A 403 is followed by the verb and resource that were refused.
func printError(w io.Writer, err error) {
	var re *requestError
	if errors.As(err, &re) && groupOf(re.resource) == "example.com" && notServed(err) {
		fmt.Fprintf(w, "error: the server does not serve databases.example.com (example.com/v1): is database-apiserver installed and its APIService Available? (check with: kubectl get apiservice v1.example.com)\n")
		return
	}
	fmt.Fprintln(w, errorMessage(err))
	if errors.As(err, &re) && apierrors.IsForbidden(err) {
		fmt.Fprintf(w, "error: this needs %q on %q in API group %q in namespace %q (check with: %s)\n",
			re.verb, re.resource, groupOf(re.resource), re.namespace, canI(re))
	}
}

// canI is the kubectl command that asks whether the current user may make the request of
// re: `kubectl auth can-i VERB RESOURCE.GROUP [--subresource=SUB] -n NAMESPACE`.
func canI(re *requestError) string {
	resource, sub, _ := strings.Cut(re.resource, "/")
	if g := groupOf(resource); g != "" {
		resource += "." + g
	}
	cmd := "kubectl auth can-i " + re.verb + " " + resource
	if sub != "" {
		cmd += " --subresource=" + sub
	}
	return cmd + " -n " + re.namespace
}

// groupOf is the API group of one of the resources the plugin uses: "example.com" for
// databases and their subresources, "apps" for statefulsets, "" (core) for the rest.
func groupOf(resource string) string {
	switch {
	case strings.HasPrefix(resource, "databases"):
		return "example.com"
	case resource == "statefulsets":
		return "apps"
	}
	return ""
}

// notServed reports whether err is a 404 that no example.com API answered: a Status that
// names no object (kube-apiserver's answer to a path nothing serves, "the server could not
// find the requested resource", has empty details), or a body that is no Status at all
// (client-go reports it with a cause of type UnexpectedServerResponse). A missing Database
// (or namespace) is a 404 whose details name it, and is not one.
func notServed(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	if details == nil || details.Name == "" {
		return true
	}
	for _, cause := range details.Causes {
		if cause.Type == metav1.CauseTypeUnexpectedServerResponse {
			return true
		}
	}
	return false
}

func errorMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		switch {
		case s.Reason == metav1.StatusReasonUnauthorized:
			return fmt.Sprintf("error: You must be logged in to the server (%s)", s.Message)
		case s.Reason != "":
			return fmt.Sprintf("Error from server (%s): %s", s.Reason, err.Error())
		default:
			return fmt.Sprintf("Error from server: %s", err.Error())
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if strings.Contains(ue.Err.Error(), "connection refused") {
			host := ue.URL
			if u, perr := url.Parse(ue.URL); perr == nil {
				host = u.Host
			}
			return fmt.Sprintf("The connection to the server %s was refused - did you specify the right host or port?", host)
		}
		return fmt.Sprintf("Unable to connect to the server: %v", ue.Err)
	}
	return "error: " + err.Error()
}
