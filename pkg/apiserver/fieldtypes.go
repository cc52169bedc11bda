package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/yaml"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// patchBodyTypes are the wire types a patch of each databases subresource is
// a (partial) object of.
var patchBodyTypes = map[string]struct {
	kind schema.GroupKind
	typ  reflect.Type
}{
	"":       {example.Kind("Database"), reflect.TypeFor[examplev1.Database]()},
	"status": {example.Kind("Database"), reflect.TypeFor[examplev1.Database]()},
	"scale":  {autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), reflect.TypeFor[autoscalingv1.Scale]()},
}

// objectPatchTypes are the patch content types whose body is a partial object:
// server-side apply (YAML or JSON), JSON merge patch and strategic merge patch.
// A JSON patch is a list of operations, and CBOR is left to the handler.
var objectPatchTypes = map[types.PatchType]bool{
	types.ApplyYAMLPatchType:      true,
	types.MergePatchType:          true,
	types.StrategicMergePatchType: true,
}

// withPatchFieldTypes refuses, with a 422 Invalid that names each field, the
// value sent and the type it must have, a patch of databases (and of their
// status and scale) whose body gives a field a value of the wrong JSON type
// (replicas: "3"), a fraction for an integer (3.5), or an integer its field
// cannot hold (99999999999 for an int32). k8s.io/apiserver answers the first
// two in a server-side apply with a 500 (its typed-patch and unstructured
// conversions return plain errors), and its unstructured converter wraps the
// third silently (1215752191), so validation would report a value the user
// never sent. An integral number (3.0, 1e1) is an integer, as the converter
// takes it. Bodies that do not parse, and every other request, go to handler
// unchanged; maxBodyBytes is the server's request body limit, beyond which the
// handler refuses the request itself.
func withPatchFieldTypes(handler http.Handler, s runtime.NegotiatedSerializer, maxBodyBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		target, known := patchBodyTypes[info.Subresource]
		if req.Method != http.MethodPatch || !ok || !info.IsResourceRequest || info.APIGroup != example.GroupName ||
			info.Resource != "databases" || !known || !objectPatchTypes[patchType(req)] || req.Body == nil {
			handler.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, maxBodyBytes+1))
		// What was read goes back, followed by anything left unread.
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		if err != nil || (maxBodyBytes > 0 && int64(len(body)) > maxBodyBytes) {
			handler.ServeHTTP(w, req)
			return
		}
		obj, ok := decodeNumbersExactly(body)
		if !ok {
			handler.ServeHTTP(w, req)
			return
		}
		if errs := checkFieldTypes(obj, target.typ, nil); len(errs) > 0 {
			responsewriters.ErrorNegotiated(apierrors.NewInvalid(target.kind, info.Name, errs),
				s, schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}, w, req)
			return
		}
		handler.ServeHTTP(w, req)
	})
}

// patchType is the request's Content-Type without parameters (charset).
func patchType(req *http.Request) types.PatchType {
	ct, _, _ := strings.Cut(req.Header.Get("Content-Type"), ";")
	return types.PatchType(strings.TrimSpace(ct))
}

// decodeNumbersExactly decodes a YAML or JSON object with its numbers as
// json.Number, so that an integer too big for its field is reported as sent.
// It reports false when body is not one object.
func decodeNumbersExactly(body []byte) (map[string]any, bool) {
	data, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

var jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkFieldTypes returns an error for every value under path that the Go wire
// type t cannot hold, following the fields' json names (inline structs
// included). A null is always accepted (the field is cleared), and so are keys
// t does not have (field validation and pruning report them) and types with
// their own JSON decoding (times, quantities, managed fields), which the
// decoder checks.
func checkFieldTypes(value any, t reflect.Type, path *field.Path) field.ErrorList {
	if value == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		return checkOwnDecoding(value, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := value.(map[string]any)
		if !ok {
			return field.ErrorList{typeInvalid(path, value, "object")}
		}
		return checkStructFields(m, t, path)
	case reflect.Map:
		m, ok := value.(map[string]any)
		if !ok {
			return field.ErrorList{typeInvalid(path, value, "object")}
		}
		var errs field.ErrorList
		for k, v := range m {
			errs = append(errs, checkFieldTypes(v, t.Elem(), path.Key(k))...)
		}
		return errs
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 { // []byte is a base64 string
			return checkString(value, path)
		}
		items, ok := value.([]any)
		if !ok {
			return field.ErrorList{typeInvalid(path, value, "array")}
		}
		var errs field.ErrorList
		for i, v := range items {
			errs = append(errs, checkFieldTypes(v, t.Elem(), path.Index(i))...)
		}
		return errs
	case reflect.String:
		return checkString(value, path)
	case reflect.Bool:
		if _, ok := value.(bool); !ok {
			return field.ErrorList{typeInvalid(path, value, "boolean")}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return checkInteger(value, path, t.Bits(), true)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return checkInteger(value, path, t.Bits(), false)
	case reflect.Float32, reflect.Float64:
		if _, ok := value.(json.Number); !ok {
			return field.ErrorList{typeInvalid(path, value, "number")}
		}
	}
	return nil
}

// checkStructFields checks each key of m that names a field of the struct t.
func checkStructFields(m map[string]any, t reflect.Type, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && (f.Anonymous || strings.Contains(","+opts+",", ",inline,")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				errs = append(errs, checkStructFields(m, ft, path)...)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if v, ok := m[name]; ok {
			errs = append(errs, checkFieldTypes(v, f.Type, path.Child(name))...)
		}
	}
	return errs
}

func checkString(value any, path *field.Path) field.ErrorList {
	if _, ok := value.(string); !ok {
		return field.ErrorList{typeInvalid(path, value, "string")}
	}
	return nil
}

// checkInteger accepts a number without a fraction that fits in an integer of
// bits bits, signed or not.
func checkInteger(value any, path *field.Path, bits int, signed bool) field.ErrorList {
	n, ok := value.(json.Number)
	if !ok {
		return field.ErrorList{typeInvalid(path, value, "integer")}
	}
	lo, hi := int64(0), uint64(math.MaxUint64>>(64-bits))
	if signed {
		lo, hi = -1<<(bits-1), 1<<(bits-1)-1
	}
	outOfRange := field.Invalid(path, sentValue(n), fmt.Sprintf(
		"must be an integer from %d to %d (%d-bit)", lo, hi, bits))
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		if i < lo || (i >= 0 && uint64(i) > hi) {
			return field.ErrorList{outOfRange}
		}
		return nil
	}
	if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		if u > hi {
			return field.ErrorList{outOfRange}
		}
		return nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		return field.ErrorList{typeInvalid(path, value, "integer")}
	}
	if f < float64(lo) || f > float64(hi) {
		return field.ErrorList{outOfRange}
	}
	return nil
}

// typeInvalid is the error of a value of the wrong JSON type, in the words of
// OpenAPI validation ("must be of type integer").
// checkOwnDecoding returns an error when value is not one the type t, which has its own
// JSON decoding (times, quantities), decodes: a server-side apply would fail to convert it
// with a 500. A time must be RFC 3339 (metav1.Time, metav1.MicroTime).
func checkOwnDecoding(value any, t reflect.Type, path *field.Path) field.ErrorList {
	data, err := json.Marshal(value)
	if err != nil {
		return nil
	}
	if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(data); err != nil {
		want := "a valid " + t.Name()
		if t == reflect.TypeFor[metav1.Time]() || t == reflect.TypeFor[metav1.MicroTime]() {
			want = "an RFC 3339 date and time"
		}
		return field.ErrorList{field.Invalid(path, sentValue(value), "must be "+want)}
	}
	return nil
}

func typeInvalid(path *field.Path, value any, want string) *field.Error {
	return field.TypeInvalid(path, sentValue(value), "must be of type "+want)
}

// sentValue is value as the user wrote it: a number as an int64 or a
// float64 when it fits one, objects and arrays as their JSON type's name.
func sentValue(value any) any {
	switch v := value.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return u
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return string(v)
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return value
}
