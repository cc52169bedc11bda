// Package controllerpolicy evaluates the ValidatingAdmissionPolicies of artifacts/policy
// offline, with the CEL compiler and evaluator of k8s.io/apiserver (the release kube-apiserver
// runs), so unit tests can hold them against the objects the controller builds without a
// cluster. It applies a policy's matchConstraints.resourceRules (API group, resource and
// subresource, operation), its matchConditions, variables and validations; it does not model
// bindings, namespace or object selectors, params or defaulting (the API server defaults an
// object before admission; a test gives objects as the controller builds them). Every policy
// of artifacts/policy has one binding, with validationActions [Deny], and uses none of those.
// The e2e tests hold the same policies on kube-apiserver itself.
package controllerpolicy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Policy is one compiled ValidatingAdmissionPolicy.
type Policy struct {
	// Spec is the policy as read.
	Spec      *admissionregistrationv1.ValidatingAdmissionPolicy
	validator validating.Validator
}

// Name is the policy's metadata.name.
func (p *Policy) Name() string { return p.Spec.Name }

// Load reads every ValidatingAdmissionPolicy of the YAML files of dir and compiles it. A
// policy whose expressions do not compile is an error naming it.
func Load(dir string) ([]*Policy, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*Policy
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := decoder.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if u.GetKind() != "ValidatingAdmissionPolicy" {
				continue
			}
			var spec admissionregistrationv1.ValidatingAdmissionPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &spec); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			p, err := compile(&spec)
			if err != nil {
				return nil, fmt.Errorf("%s: policy %s: %w", f, spec.Name, err)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// compile compiles the policy's variables, matchConditions, validations and their
// messageExpressions in kube-apiserver's environment for admission policies (the base
// environment of this release, with request, object, oldObject, namespaceObject, variables
// and authorizer), and fails on the first expression that does not compile.
func compile(spec *admissionregistrationv1.ValidatingAdmissionPolicy) (*Policy, error) {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, err
	}
	vars := plugincel.OptionalVariableDeclarations{HasParams: spec.Spec.ParamKind != nil, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: spec.Spec.ParamKind != nil}
	var errs []error
	check := func(what string, r plugincel.CompilationResult) {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, r.Error))
		}
	}
	for _, v := range spec.Spec.Variables {
		if !celIdentifier.MatchString(v.Name) || slices.Contains(celReserved, v.Name) {
			errs = append(errs, fmt.Errorf("variable %q: not a CEL identifier", v.Name))
		}
		check("variable "+v.Name, compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, environment.StoredExpressions))
	}
	var conditions, validations, messages []plugincel.ExpressionAccessor
	for i := range spec.Spec.MatchConditions {
		conditions = append(conditions, (*matchconditions.MatchCondition)(&spec.Spec.MatchConditions[i]))
	}
	for _, v := range spec.Spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		messages = append(messages, &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression})
	}
	// Compile each expression alone too: the evaluators keep compilation errors to report
	// them at evaluation, where a refusal would hide them.
	for i, c := range conditions {
		check(fmt.Sprintf("matchCondition %d", i), compiler.CompileCELExpression(c, vars, environment.StoredExpressions))
	}
	for i, v := range validations {
		check(fmt.Sprintf("validation %d", i), compiler.CompileCELExpression(v, vars, environment.StoredExpressions))
	}
	for i, m := range messages {
		if m.GetExpression() != "" {
			check(fmt.Sprintf("messageExpression %d", i), compiler.CompileCELExpression(m, messageVars, environment.StoredExpressions))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var matcher matchconditions.Matcher
	if len(conditions) > 0 {
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(conditions, vars, environment.StoredExpressions),
			spec.Spec.FailurePolicy, "policy", "validate", spec.Name)
	}
	validator := validating.NewValidator(
		compiler.CompileCondition(validations, vars, environment.StoredExpressions), matcher,
		compiler.CompileCondition(nil, vars, environment.StoredExpressions),
		compiler.CompileCondition(messages, messageVars, environment.StoredExpressions),
		spec.Spec.FailurePolicy, nil)
	return &Policy{Spec: spec, validator: validator}, nil
}

// A variable's name must be a CEL identifier that is not a reserved word, as kube-apiserver
// validates it (https://github.com/google/cel-spec/blob/master/doc/langdef.md#syntax).
var (
	celIdentifier = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved   = []string{"as", "break", "const", "continue", "else", "false", "for", "function", "if",
		"import", "in", "let", "loop", "package", "namespace", "null", "return", "true", "var", "void", "while"}
)

// Request is one write to hold against the policies.
type Request struct {
	// Operation is admission.Create, Update or Delete.
	Operation admission.Operation
	// Object is the object written (nil for a delete), OldObject the one stored (nil for a
	// create); both of Kind.
	Object, OldObject runtime.Object
	// Kind and Resource are the object's group, version, kind and resource; Subresource is
	// "" or e.g. "status".
	Kind        schema.GroupVersionKind
	Resource    schema.GroupVersionResource
	Subresource string
	// Namespace and Name are the request's.
	Namespace, Name string
	// User is the user who writes.
	User string
}

// Matches reports whether p's matchConstraints.resourceRules select r (its matchConditions
// are evaluated by Validate).
func (p *Policy) Matches(r Request) bool {
	resource := r.Resource.Resource
	if r.Subresource != "" {
		resource += "/" + r.Subresource
	}
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, rule := range p.Spec.Spec.MatchConstraints.ResourceRules {
		var ops []string
		for _, op := range rule.Operations {
			ops = append(ops, string(op))
		}
		if has(rule.APIGroups, r.Resource.Group) && has(rule.APIVersions, r.Resource.Version) &&
			has(rule.Resources, resource) && has(ops, string(r.Operation)) {
			return true
		}
	}
	return false
}

// Denial is a policy's refusal of a request: the policy's name and the messages of its
// validations that failed.
type Denial struct {
	Policy   string
	Messages []string
}

func (d Denial) String() string { return d.Policy + ": " + strings.Join(d.Messages, "; ") }

// Validate holds r against every policy of policies that matches it, and returns the
// refusals, none when every one admits it.
func Validate(policies []*Policy, r Request) ([]Denial, error) {
	attrs := admission.NewAttributesRecord(r.Object, r.OldObject, r.Kind, r.Namespace, r.Name, r.Resource,
		r.Subresource, r.Operation, nil, false, &user.DefaultInfo{Name: r.User})
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: r.Kind,
		VersionedObject: admission.NewLazyObject(r.Object), VersionedOldObject: admission.NewLazyObject(r.OldObject)}
	var ns *corev1.Namespace
	if r.Namespace != "" {
		ns = &corev1.Namespace{}
		ns.Name = r.Namespace
	}
	var out []Denial
	for _, p := range policies {
		if !p.Matches(r) {
			continue
		}
		result := p.validator.Validate(context.Background(), r.Resource, versioned, nil, ns, celconfig.RuntimeCELCostBudget, nil)
		var msgs []string
		for _, d := range result.Decisions {
			if d.Action == validating.ActionDeny {
				msgs = append(msgs, d.Message)
			}
		}
		if len(msgs) > 0 {
			out = append(out, Denial{Policy: p.Name(), Messages: msgs})
		}
	}
	return out, nil
}
