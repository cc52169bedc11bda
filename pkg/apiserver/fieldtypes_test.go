package apiserver

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkFieldTypes takes the integers each Go integer type holds, integral
// numbers included, and names the field and the sent value of any other.
func TestCheckFieldTypesIntegers(t *testing.T) {
	type wire struct {
		I32 int32   `json:"i32"`
		I64 *int64  `json:"i64"`
		U8  uint8   `json:"u8"`
		F   float64 `json:"f"`
	}
	for _, tc := range []struct {
		body string
		want string // the error, empty when accepted
	}{
		{`{"i32":2147483647,"i64":-9223372036854775808,"u8":255,"f":1.5}`, ""},
		{`{"i32":-2147483648,"i64":null,"u8":0,"f":1}`, ""},
		{`{"i32":1e3,"u8":2.0}`, ""},
		{`{"i32":2147483648}`, "i32: Invalid value: 2147483648: must be an integer from -2147483648 to 2147483647 (32-bit)"},
		{`{"i64":9223372036854775808}`, "i64: Invalid value: 9223372036854775808: must be an integer from -9223372036854775808 to 9223372036854775807 (64-bit)"},
		{`{"u8":-1}`, "u8: Invalid value: -1: must be an integer from 0 to 255 (8-bit)"},
		{`{"u8":256}`, "u8: Invalid value: 256: must be an integer from 0 to 255 (8-bit)"},
		{`{"i32":1e30}`, "i32: Invalid value: 1e+30: must be an integer from -2147483648 to 2147483647 (32-bit)"},
		{`{"i32":0.5}`, "i32: Invalid value: 0.5: must be of type integer"},
		{`{"f":"1"}`, `f: Invalid value: "1": must be of type number`},
	} {
		obj, ok := decodeNumbersExactly([]byte(tc.body))
		require.True(t, ok, tc.body)
		errs := checkFieldTypes(obj, reflect.TypeFor[wire](), nil)
		if tc.want == "" {
			require.Empty(t, errs, tc.body)
			continue
		}
		require.Len(t, errs, 1, tc.body)
		require.Equal(t, tc.want, errs[0].Error(), tc.body)
	}
}

// Keys the type does not have, nulls and types with their own JSON decoding
// are left to the decoder; a body that is not one object is not checked.
func TestCheckFieldTypesLeavesTheRestToTheDecoder(t *testing.T) {
	type wire struct {
		Raw  json.RawMessage `json:"raw"`
		Tags []string        `json:"tags"`
	}
	obj, ok := decodeNumbersExactly([]byte(`{"raw":{"any":1},"tags":null,"unknown":3}`))
	require.True(t, ok)
	require.Empty(t, checkFieldTypes(obj, reflect.TypeFor[wire](), nil))
	obj, ok = decodeNumbersExactly([]byte(`{"tags":["a",1]}`))
	require.True(t, ok)
	require.Equal(t, field.ErrorList{field.TypeInvalid(field.NewPath("tags").Index(1), int64(1), "must be of type string")},
		checkFieldTypes(obj, reflect.TypeFor[wire](), nil))
	for _, body := range []string{`[1]`, `"x"`, `{`, `null`} {
		_, ok := decodeNumbersExactly([]byte(body))
		require.False(t, ok, body)
	}
}
