package tests

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// The argument-schema validator, convo.args_errors(schema, value), tested in
// the format of the official JSON-Schema-Test-Suite: groups of one schema
// and the values it must accept (valid) or refuse. A refusing case may also
// list the errors it must produce: each names the JSON path and the rule; an
// entry ending in "*" matches any error that starts with the rest.

type schemaSuiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
		Errors      []string        `json:"errors"`
	} `json:"tests"`
}

const schemaSuite = `[
{"description": "type object", "schema": {"type": "object"}, "tests": [
	{"description": "an object is valid", "data": {}, "valid": true},
	{"description": "an array is not an object", "data": [], "valid": false, "errors": ["$: type: expected object, got array"]},
	{"description": "a string is not an object", "data": "{}", "valid": false},
	{"description": "a number is not an object", "data": 1, "valid": false},
	{"description": "null is not an object", "data": null, "valid": false, "errors": ["$: type: expected object, got null"]},
	{"description": "a boolean is not an object", "data": true, "valid": false}]},
{"description": "type array", "schema": {"type": "array"}, "tests": [
	{"description": "an array is valid", "data": [1, "a"], "valid": true},
	{"description": "an object is not an array", "data": {"0": 1}, "valid": false},
	{"description": "a string is not an array", "data": "[]", "valid": false}]},
{"description": "type string", "schema": {"type": "string"}, "tests": [
	{"description": "a string is valid", "data": "foo", "valid": true},
	{"description": "an empty string is valid", "data": "", "valid": true},
	{"description": "a numeric string is a string", "data": "1", "valid": true},
	{"description": "a number is not a string", "data": 1, "valid": false, "errors": ["$: type: expected string, got number"]},
	{"description": "null is not a string", "data": null, "valid": false}]},
{"description": "type integer", "schema": {"type": "integer"}, "tests": [
	{"description": "an integer is valid", "data": 1, "valid": true},
	{"description": "a negative integer is valid", "data": -5, "valid": true},
	{"description": "1.0 is an integer", "data": 1.0, "valid": true},
	{"description": "0.0 is an integer", "data": 0.0, "valid": true},
	{"description": "1e2 is an integer", "data": 1e2, "valid": true},
	{"description": "a big integer is valid", "data": 123456789012345678901234567890, "valid": true},
	{"description": "1.1 is not an integer", "data": 1.1, "valid": false, "errors": ["$: type: expected integer, got number"]},
	{"description": "a numeric string is not an integer", "data": "1", "valid": false, "errors": ["$: type: expected integer, got string"]},
	{"description": "a boolean is not an integer", "data": true, "valid": false}]},
{"description": "type number", "schema": {"type": "number"}, "tests": [
	{"description": "an integer is a number", "data": 1, "valid": true},
	{"description": "a float is a number", "data": 1.5, "valid": true},
	{"description": "a numeric string is not a number", "data": "1.5", "valid": false},
	{"description": "null is not a number", "data": null, "valid": false}]},
{"description": "type boolean", "schema": {"type": "boolean"}, "tests": [
	{"description": "true is valid", "data": true, "valid": true},
	{"description": "false is valid", "data": false, "valid": true},
	{"description": "zero is not a boolean", "data": 0, "valid": false},
	{"description": "the string true is not a boolean", "data": "true", "valid": false},
	{"description": "null is not a boolean", "data": null, "valid": false}]},
{"description": "type null", "schema": {"type": "null"}, "tests": [
	{"description": "null is valid", "data": null, "valid": true},
	{"description": "zero is not null", "data": 0, "valid": false},
	{"description": "an empty string is not null", "data": "", "valid": false},
	{"description": "false is not null", "data": false, "valid": false},
	{"description": "an empty object is not null", "data": {}, "valid": false}]},
{"description": "a list of types", "schema": {"type": ["integer", "string"]}, "tests": [
	{"description": "an integer is valid", "data": 1, "valid": true},
	{"description": "an integral float is valid", "data": 2.0, "valid": true},
	{"description": "a string is valid", "data": "foo", "valid": true},
	{"description": "a float is invalid", "data": 1.5, "valid": false, "errors": ["$: type: expected integer or string, got number"]},
	{"description": "null is invalid", "data": null, "valid": false},
	{"description": "an object is invalid", "data": {}, "valid": false}]},
{"description": "a nullable string", "schema": {"type": ["string", "null"]}, "tests": [
	{"description": "null is valid", "data": null, "valid": true},
	{"description": "a string is valid", "data": "a", "valid": true},
	{"description": "a number is invalid", "data": 5, "valid": false}]},
{"description": "properties", "schema": {"properties": {"foo": {"type": "integer"}, "bar": {"type": "string"}}}, "tests": [
	{"description": "both present and valid", "data": {"foo": 1, "bar": "baz"}, "valid": true},
	{"description": "one invalid", "data": {"foo": 1, "bar": {}}, "valid": false, "errors": ["$.bar: type: expected string, got object"]},
	{"description": "both invalid", "data": {"foo": [], "bar": {}}, "valid": false,
	 "errors": ["$.foo: type: expected integer, got array", "$.bar: type: expected string, got object"]},
	{"description": "other properties are allowed", "data": {"quux": []}, "valid": true},
	{"description": "properties are optional", "data": {}, "valid": true},
	{"description": "an array is ignored", "data": [], "valid": true},
	{"description": "a number is ignored", "data": 12, "valid": true}]},
{"description": "required", "schema": {"properties": {"foo": {}, "bar": {}}, "required": ["foo"]}, "tests": [
	{"description": "present", "data": {"foo": 1}, "valid": true},
	{"description": "present as null", "data": {"foo": null}, "valid": true},
	{"description": "missing", "data": {"bar": 1}, "valid": false, "errors": ["$.foo: required"]},
	{"description": "an array is ignored", "data": [], "valid": true},
	{"description": "a string is ignored", "data": "", "valid": true}]},
{"description": "required with keys that need quoting", "schema": {"required": ["odd key", "a.b", "x\"y"]}, "tests": [
	{"description": "all present", "data": {"odd key": 1, "a.b": 2, "x\"y": 3}, "valid": true},
	{"description": "all missing", "data": {}, "valid": false,
	 "errors": ["$[\"odd key\"]: required", "$[\"a.b\"]: required", "$[\"x\\\"y\"]: required"]}]},
{"description": "additionalProperties false", "schema": {"properties": {"foo": {}, "bar": {}}, "additionalProperties": false}, "tests": [
	{"description": "no additional property", "data": {"foo": 1}, "valid": true},
	{"description": "an additional property", "data": {"foo": 1, "bar": 2, "quux": "boom"}, "valid": false,
	 "errors": ["$.quux: additionalProperties: not allowed"]},
	{"description": "an array is ignored", "data": [1, 2, 3], "valid": true},
	{"description": "a string is ignored", "data": "foobarbaz", "valid": true}]},
{"description": "additionalProperties false without properties", "schema": {"additionalProperties": false}, "tests": [
	{"description": "an empty object", "data": {}, "valid": true},
	{"description": "any property", "data": {"odd key": 1}, "valid": false, "errors": ["$[\"odd key\"]: additionalProperties: not allowed"]}]},
{"description": "additionalProperties true", "schema": {"properties": {"foo": {}}, "additionalProperties": true}, "tests": [
	{"description": "an additional property is allowed", "data": {"foo": 1, "quux": "boom"}, "valid": true}]},
{"description": "enum of scalars", "schema": {"enum": [1, 2, 3]}, "tests": [
	{"description": "a member", "data": 1, "valid": true},
	{"description": "a member written as 1.0", "data": 1.0, "valid": true},
	{"description": "not a member", "data": 4, "valid": false, "errors": ["$: enum: must be one of [1, 2, 3]"]},
	{"description": "true is not 1", "data": true, "valid": false},
	{"description": "the string is not the number", "data": "1", "valid": false}]},
{"description": "heterogeneous enum", "schema": {"enum": [6, "foo", [], true, {"foo": 12}]}, "tests": [
	{"description": "an empty array", "data": [], "valid": true},
	{"description": "the object", "data": {"foo": 12}, "valid": true},
	{"description": "null is not a member", "data": null, "valid": false},
	{"description": "an object with another value", "data": {"foo": false}, "valid": false},
	{"description": "an object with an extra property", "data": {"foo": 12, "boo": 42}, "valid": false},
	{"description": "a non-empty array", "data": [6], "valid": false}]},
{"description": "enum of objects is equality, not containment", "schema": {"enum": [{"a": 1}]}, "tests": [
	{"description": "the object", "data": {"a": 1}, "valid": true},
	{"description": "a larger object that contains it", "data": {"a": 1, "b": 2}, "valid": false, "errors": ["$: enum: *"]},
	{"description": "an array holding it", "data": [{"a": 1}], "valid": false},
	{"description": "an empty object", "data": {}, "valid": false}]},
{"description": "enum of arrays", "schema": {"enum": [[1, 2]]}, "tests": [
	{"description": "the array", "data": [1, 2], "valid": true},
	{"description": "another order", "data": [2, 1], "valid": false},
	{"description": "a longer array", "data": [1, 2, 3], "valid": false},
	{"description": "an element of it", "data": 1, "valid": false}]},
{"description": "enum with false, true and null", "schema": {"enum": [false, null]}, "tests": [
	{"description": "false", "data": false, "valid": true},
	{"description": "null", "data": null, "valid": true},
	{"description": "zero is not false", "data": 0, "valid": false},
	{"description": "an empty string is not null", "data": "", "valid": false}]},
{"description": "const number", "schema": {"const": 2}, "tests": [
	{"description": "the value", "data": 2, "valid": true},
	{"description": "the value written as 2.0", "data": 2.0, "valid": true},
	{"description": "another value", "data": 5, "valid": false, "errors": ["$: const: must be 2"]},
	{"description": "another type", "data": "2", "valid": false}]},
{"description": "const object", "schema": {"const": {"foo": "bar", "baz": "bax"}}, "tests": [
	{"description": "the same object", "data": {"foo": "bar", "baz": "bax"}, "valid": true},
	{"description": "the same object, keys in another order", "data": {"baz": "bax", "foo": "bar"}, "valid": true},
	{"description": "a smaller object", "data": {"foo": "bar"}, "valid": false},
	{"description": "a larger object", "data": {"foo": "bar", "baz": "bax", "x": 1}, "valid": false},
	{"description": "an array holding it", "data": [{"foo": "bar", "baz": "bax"}], "valid": false}]},
{"description": "const array", "schema": {"const": [{"foo": "bar"}]}, "tests": [
	{"description": "the same array", "data": [{"foo": "bar"}], "valid": true},
	{"description": "another array", "data": [2], "valid": false},
	{"description": "its element", "data": {"foo": "bar"}, "valid": false}]},
{"description": "const false and null", "schema": {"properties": {"f": {"const": false}, "n": {"const": null}}}, "tests": [
	{"description": "false and null", "data": {"f": false, "n": null}, "valid": true},
	{"description": "zero is not false, zero is not null", "data": {"f": 0, "n": 0}, "valid": false,
	 "errors": ["$.f: const: must be false", "$.n: const: must be null"]}]},
{"description": "the schema true accepts anything", "schema": true, "tests": [
	{"description": "an object", "data": {"a": [1, {"b": null}]}, "valid": true},
	{"description": "null", "data": null, "valid": true},
	{"description": "a string", "data": "x", "valid": true}]},
{"description": "the schema false accepts nothing", "schema": false, "tests": [
	{"description": "an empty object", "data": {}, "valid": false, "errors": ["$: false: no value is allowed"]},
	{"description": "null", "data": null, "valid": false, "errors": ["$: false: no value is allowed"]},
	{"description": "false", "data": false, "valid": false}]},
{"description": "boolean property schemas", "schema": {"type": "object", "properties": {"yes": true, "no": false, "odd key": false}}, "tests": [
	{"description": "the true property, any value", "data": {"yes": [1, "x"]}, "valid": true},
	{"description": "neither", "data": {"other": 1}, "valid": true},
	{"description": "the false property, even as null", "data": {"yes": 1, "no": null}, "valid": false, "errors": ["$.no: false: no value is allowed"]},
	{"description": "a false property whose key needs quoting", "data": {"odd key": 1}, "valid": false, "errors": ["$[\"odd key\"]: false: no value is allowed"]}]},
{"description": "items false", "schema": {"items": false}, "tests": [
	{"description": "an empty array", "data": [], "valid": true},
	{"description": "every element fails", "data": [1, "a"], "valid": false, "errors": ["$[0]: false: no value is allowed", "$[1]: false: no value is allowed"]},
	{"description": "an object is not an array", "data": {"0": 1}, "valid": true}]},
{"description": "items true", "schema": {"type": "array", "items": true, "maxItems": 2}, "tests": [
	{"description": "any elements", "data": [{}, null], "valid": true},
	{"description": "too many", "data": [1, 2, 3], "valid": false, "errors": ["$: maxItems 2"]}]},
{"description": "false deep down", "schema": {"properties": {"a": {"items": {"properties": {"b": false}}}}}, "tests": [
	{"description": "b absent", "data": {"a": [{}, {"c": 1}]}, "valid": true},
	{"description": "b present in the second element", "data": {"a": [{}, {"b": 1}]}, "valid": false, "errors": ["$.a[1].b: false: no value is allowed"]}]},
{"description": "an empty enum matches nothing", "schema": {"enum": []}, "tests": [
	{"description": "null", "data": null, "valid": false, "errors": ["$: enum: must be one of []"]},
	{"description": "an empty array", "data": [], "valid": false},
	{"description": "a number", "data": 1, "valid": false}]},
{"description": "an empty enum on an optional property", "schema": {"properties": {"never": {"enum": []}}}, "tests": [
	{"description": "absent", "data": {}, "valid": true},
	{"description": "present", "data": {"never": "x"}, "valid": false, "errors": ["$.never: enum: must be one of []"]}]},
{"description": "minLength counts characters", "schema": {"minLength": 2}, "tests": [
	{"description": "longer", "data": "foo", "valid": true},
	{"description": "exactly", "data": "fo", "valid": true},
	{"description": "shorter", "data": "f", "valid": false, "errors": ["$: minLength 2"]},
	{"description": "one two-byte character is one character", "data": "ü", "valid": false},
	{"description": "two two-byte characters", "data": "üü", "valid": true},
	{"description": "one four-byte emoji is one character", "data": "💩", "valid": false, "errors": ["$: minLength 2"]},
	{"description": "a number is ignored", "data": 1, "valid": true}]},
{"description": "maxLength counts characters", "schema": {"maxLength": 2}, "tests": [
	{"description": "shorter", "data": "f", "valid": true},
	{"description": "exactly", "data": "fo", "valid": true},
	{"description": "longer", "data": "foo", "valid": false, "errors": ["$: maxLength 2"]},
	{"description": "two two-byte characters (4 bytes)", "data": "üü", "valid": true},
	{"description": "two emoji (8 bytes)", "data": "💩💩", "valid": true},
	{"description": "three two-byte characters", "data": "üüü", "valid": false},
	{"description": "x, e and a combining accent are three characters", "data": "xe\u0301", "valid": false},
	{"description": "a number is ignored", "data": 100, "valid": true}]},
{"description": "pattern", "schema": {"pattern": "^a*$"}, "tests": [
	{"description": "a match", "data": "aaa", "valid": true},
	{"description": "the empty string matches", "data": "", "valid": true},
	{"description": "no match", "data": "abc", "valid": false, "errors": ["$: pattern \"^a*$\""]},
	{"description": "a boolean is ignored", "data": true, "valid": true},
	{"description": "a number is ignored", "data": 123, "valid": true},
	{"description": "null is ignored", "data": null, "valid": true}]},
{"description": "pattern is not anchored", "schema": {"pattern": "a+"}, "tests": [
	{"description": "a match in the middle", "data": "xxaayy", "valid": true},
	{"description": "no match", "data": "xyz", "valid": false}]},
{"description": "pattern is a PostgreSQL regular expression", "schema": {"pattern": "^[[:digit:]]{3}-\\d{4}$"}, "tests": [
	{"description": "a match", "data": "555-1234", "valid": true},
	{"description": "no match", "data": "5551234", "valid": false},
	{"description": "a letter is not a digit", "data": "555-123x", "valid": false}]},
{"description": "pattern with non-ASCII characters", "schema": {"pattern": "^ü{2}$"}, "tests": [
	{"description": "two characters", "data": "üü", "valid": true},
	{"description": "one character", "data": "ü", "valid": false}]},
{"description": "minimum is inclusive", "schema": {"minimum": 1.1}, "tests": [
	{"description": "above", "data": 2.6, "valid": true},
	{"description": "at the boundary", "data": 1.1, "valid": true},
	{"description": "below", "data": 0.6, "valid": false, "errors": ["$: minimum 1.1"]},
	{"description": "a string is ignored", "data": "x", "valid": true}]},
{"description": "negative minimum", "schema": {"minimum": -2}, "tests": [
	{"description": "above", "data": -1, "valid": true},
	{"description": "at the boundary", "data": -2, "valid": true},
	{"description": "just below", "data": -2.0001, "valid": false},
	{"description": "below", "data": -3, "valid": false}]},
{"description": "maximum is inclusive", "schema": {"maximum": 3.0}, "tests": [
	{"description": "below", "data": 2.6, "valid": true},
	{"description": "at the boundary", "data": 3, "valid": true},
	{"description": "above", "data": 3.5, "valid": false, "errors": ["$: maximum 3.0"]},
	{"description": "a string is ignored", "data": "x", "valid": true}]},
{"description": "maximum beyond 64 bits", "schema": {"maximum": 18446744073709551615}, "tests": [
	{"description": "at the boundary", "data": 18446744073709551615, "valid": true},
	{"description": "one above", "data": 18446744073709551616, "valid": false}]},
{"description": "items", "schema": {"items": {"type": "integer"}}, "tests": [
	{"description": "all valid", "data": [1, 2, 3], "valid": true},
	{"description": "an empty array", "data": [], "valid": true},
	{"description": "one invalid", "data": [1, "x"], "valid": false, "errors": ["$[1]: type: expected integer, got string"]},
	{"description": "an object is ignored", "data": {"0": "invalid"}, "valid": true}]},
{"description": "nested items", "schema": {"items": {"items": {"type": "string"}}}, "tests": [
	{"description": "all valid", "data": [["a"], ["b", "c"]], "valid": true},
	{"description": "a nested element invalid", "data": [["a"], ["b", 1]], "valid": false, "errors": ["$[1][1]: type: expected string, got number"]}]},
{"description": "minItems", "schema": {"minItems": 1}, "tests": [
	{"description": "longer", "data": [1, 2], "valid": true},
	{"description": "exactly", "data": [1], "valid": true},
	{"description": "shorter", "data": [], "valid": false, "errors": ["$: minItems 1"]},
	{"description": "a string is ignored", "data": "", "valid": true}]},
{"description": "maxItems", "schema": {"maxItems": 2}, "tests": [
	{"description": "shorter", "data": [1], "valid": true},
	{"description": "exactly", "data": [1, 2], "valid": true},
	{"description": "longer", "data": [1, 2, 3], "valid": false, "errors": ["$: maxItems 2"]},
	{"description": "a string is ignored", "data": "foobar", "valid": true}]},
{"description": "annotations are ignored", "schema": {"title": "t", "description": "d", "$comment": "c", "examples": ["x"], "default": "x", "type": "integer"}, "tests": [
	{"description": "an integer is valid", "data": 1, "valid": true},
	{"description": "the default and the example are not valid", "data": "x", "valid": false, "errors": ["$: type: *"]}]},
{"description": "a default does not fill a required property", "schema": {"properties": {"a": {"default": 1, "title": "A"}}, "required": ["a"]}, "tests": [
	{"description": "present", "data": {"a": "anything"}, "valid": true},
	{"description": "missing", "data": {}, "valid": false, "errors": ["$.a: required"]}]},
{"description": "properties named like keywords", "schema": {"properties": {"format": {"type": "string"}, "enum": {"type": "integer"}}, "required": ["format"]}, "tests": [
	{"description": "both valid", "data": {"format": "x", "enum": 1}, "valid": true},
	{"description": "a property named format is checked", "data": {"format": 1}, "valid": false, "errors": ["$.format: type: expected string, got number"]},
	{"description": "a property named enum is checked", "data": {"format": "x", "enum": "1"}, "valid": false, "errors": ["$.enum: type: expected integer, got string"]},
	{"description": "missing", "data": {}, "valid": false, "errors": ["$.format: required"]}]},
{"description": "an empty schema accepts anything", "schema": {}, "tests": [
	{"description": "an object", "data": {"a": [1, {"b": null}]}, "valid": true},
	{"description": "null", "data": null, "valid": true}]},
{"description": "nested combination (a purchase)", "schema": {
	"type": "object",
	"properties": {
		"amount_minor": {"type": "integer", "minimum": 1, "maximum": 1000000},
		"currency": {"type": "string", "enum": ["EUR", "USD"]},
		"items": {"type": "array", "minItems": 1, "maxItems": 5, "items": {
			"type": "object",
			"properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}, "qty": {"type": "integer", "minimum": 1}},
			"required": ["sku", "qty"],
			"additionalProperties": false}},
		"odd key": {"type": "string", "maxLength": 3},
		"note": {"type": ["string", "null"], "maxLength": 10}},
	"required": ["amount_minor", "currency"],
	"additionalProperties": false}, "tests": [
	{"description": "valid", "data": {"amount_minor": 500, "currency": "EUR", "items": [{"sku": "ABC-1", "qty": 1}, {"sku": "XYZ-22", "qty": 2.0}], "odd key": "ok", "note": null}, "valid": true},
	{"description": "the minimum", "data": {"amount_minor": 0, "currency": "EUR"}, "valid": false, "errors": ["$.amount_minor: minimum 1"]},
	{"description": "the maximum", "data": {"amount_minor": 1000001, "currency": "EUR"}, "valid": false, "errors": ["$.amount_minor: maximum 1000000"]},
	{"description": "a fractional amount", "data": {"amount_minor": 5.5, "currency": "EUR"}, "valid": false, "errors": ["$.amount_minor: type: expected integer, got number"]},
	{"description": "a currency outside the enum", "data": {"amount_minor": 1, "currency": "GBP"}, "valid": false, "errors": ["$.currency: enum: must be one of *"]},
	{"description": "an element that is not an object", "data": {"amount_minor": 1, "currency": "EUR", "items": [{"sku": "ABC-1", "qty": 1}, {"sku": "ABC-2", "qty": 1}, "ABC-3"]}, "valid": false,
	 "errors": ["$.items[2]: type: expected object, got string"]},
	{"description": "a property of an element", "data": {"amount_minor": 1, "currency": "EUR", "items": [{"sku": "ABC-1", "qty": 1}, {"sku": "ABC-2", "qty": 1}, {"sku": "abc", "qty": "x"}]}, "valid": false,
	 "errors": ["$.items[2].sku: pattern \"^[A-Z]{3}-[0-9]+$\"", "$.items[2].qty: type: expected integer, got string"]},
	{"description": "a required and an additional property of an element", "data": {"amount_minor": 1, "currency": "EUR", "items": [{"qty": 1, "x": 1}]}, "valid": false,
	 "errors": ["$.items[0].sku: required", "$.items[0].x: additionalProperties: not allowed"]},
	{"description": "too many elements", "data": {"amount_minor": 1, "currency": "EUR", "items": [{"sku": "A-1", "qty": 1}, {"sku": "ABC-1", "qty": 1}, {"sku": "ABC-1", "qty": 1}, {"sku": "ABC-1", "qty": 1}, {"sku": "ABC-1", "qty": 1}, {"sku": "ABC-1", "qty": 1}]}, "valid": false,
	 "errors": ["$.items: maxItems 5", "$.items[0].sku: pattern *"]},
	{"description": "no elements", "data": {"amount_minor": 1, "currency": "EUR", "items": []}, "valid": false, "errors": ["$.items: minItems 1"]},
	{"description": "a key that needs quoting", "data": {"amount_minor": 1, "currency": "EUR", "odd key": "long"}, "valid": false, "errors": ["$[\"odd key\"]: maxLength 3"]},
	{"description": "a nullable string too long", "data": {"amount_minor": 1, "currency": "EUR", "note": "0123456789ü"}, "valid": false, "errors": ["$.note: maxLength 10"]},
	{"description": "a missing key and an additional one", "data": {"amount_minor": 1, "extra": true}, "valid": false,
	 "errors": ["$.currency: required", "$.extra: additionalProperties: not allowed"]},
	{"description": "every error at once", "data": {"amount_minor": -1, "currency": 1, "items": [{"sku": "ABC-1", "qty": 0}], "odd key": 7, "extra": 1}, "valid": false,
	 "errors": ["$.amount_minor: minimum 1", "$.currency: type: expected string, got number", "$.items[0].qty: minimum 1",
	            "$[\"odd key\"]: type: expected string, got number", "$.extra: additionalProperties: not allowed"]},
	{"description": "not an object at all", "data": [], "valid": false, "errors": ["$: type: expected object, got array"]}]}
]`

// TestArgsErrorsSuite runs schemaSuite through convo.args_errors. Every
// schema of the suite must also pass convo.check_args_schema (what
// register_tool checks), so the validator and the registry agree on the
// subset.
func TestArgsErrorsSuite(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	var groups []schemaSuiteGroup
	if err := json.Unmarshal([]byte(schemaSuite), &groups); err != nil {
		t.Fatalf("parsing the suite: %v", err)
	}
	for _, g := range groups {
		t.Run(g.Description, func(t *testing.T) {
			if _, err := db.Exec(ctx, `SELECT convo_private.check_args_schema($1)`, string(g.Schema)); err != nil {
				t.Fatalf("check_args_schema refuses %s: %v", g.Schema, err)
			}
			for _, c := range g.Tests {
				var errs []string
				if err := db.QueryRow(ctx, `SELECT convo.args_errors($1, $2)`, string(g.Schema), string(c.Data)).Scan(&errs); err != nil {
					t.Fatalf("%s: args_errors(%s, %s): %v", c.Description, g.Schema, c.Data, err)
				}
				if got := len(errs) == 0; got != c.Valid {
					t.Errorf("%s: args_errors(%s, %s) = %q: valid %v, want %v", c.Description, g.Schema, c.Data, errs, got, c.Valid)
					continue
				}
				for _, e := range errs {
					if !strings.HasPrefix(e, "$") || !strings.Contains(e, ": ") {
						t.Errorf("%s: error %q does not start with a JSON path and a rule", c.Description, e)
					}
				}
				if c.Errors != nil && !errorsMatch(errs, c.Errors) {
					t.Errorf("%s: args_errors(%s, %s)\n got  %q\n want %q", c.Description, g.Schema, c.Data, errs, c.Errors)
				}
			}
		})
	}
}

// errorsMatch reports whether got and want hold the same errors in any
// order; a want entry ending in "*" matches an error that starts with the
// rest of it.
func errorsMatch(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if used[i] {
				continue
			}
			if g == w || strings.HasSuffix(w, "*") && strings.HasPrefix(g, strings.TrimSuffix(w, "*")) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestArgsErrorsNamesEveryFailure: one call reports every failing value of
// a document, each once, each with its own path.
func TestArgsErrorsNamesEveryFailure(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	schema := `{"type": "object", "properties": {
		"amount_minor": {"type": "integer", "minimum": 1},
		"items": {"type": "array", "items": {"type": "integer"}},
		"odd key": {"type": "string"}}}`
	got := queryRow[[]string](t, db, `SELECT convo.args_errors($1, $2)`, schema,
		`{"amount_minor": 0, "items": [1, 2, "three", 4, null], "odd key": 5}`)
	want := []string{
		"$.amount_minor: minimum 1",
		"$.items[2]: type: expected integer, got string",
		"$.items[4]: type: expected integer, got null",
		`$["odd key"]: type: expected string, got number`,
	}
	if !errorsMatch(got, want) {
		t.Fatalf("args_errors:\n got  %q\n want %q", got, want)
	}
}

// TestRegisterToolRefusesUnsupportedSchemas: a schema keyword outside the
// subset, a malformed value of a supported one, or a schema that is neither
// an object nor true or false is refused with CV011, wherever it sits, and no
// tool is written.
// The error names the keyword and where it is.
func TestRegisterToolRefusesUnsupportedSchemas(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const sqlRegister = `SELECT convo.register_tool('refused_tool', true, $1)`
	type schemaCase struct {
		name, schema string
		mentions     []string
	}
	cases := []schemaCase{
		// Keywords outside the subset.
		{"format", `{"type": "string", "format": "email"}`, []string{"format", "$"}},
		{"oneOf", `{"oneOf": [{"type": "string"}, {"type": "integer"}]}`, []string{"oneOf"}},
		{"anyOf", `{"anyOf": [{"type": "string"}]}`, []string{"anyOf"}},
		{"allOf", `{"allOf": [{"type": "string"}]}`, []string{"allOf"}},
		{"not", `{"not": {"type": "string"}}`, []string{"not"}},
		{"if/then", `{"if": {"type": "string"}, "then": {"minLength": 1}}`, nil},
		{"$ref", `{"$ref": "#/definitions/x", "definitions": {"x": {}}}`, nil},
		{"$defs", `{"$defs": {"x": {}}}`, []string{"$defs"}},
		{"$schema", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}`, []string{"$schema"}},
		{"patternProperties", `{"patternProperties": {"^a": {"type": "string"}}}`, []string{"patternProperties"}},
		{"additionalProperties as a schema", `{"properties": {"a": {}}, "additionalProperties": {"type": "string"}}`, []string{"additionalProperties"}},
		{"items as a tuple", `{"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}`, []string{"$.items"}},
		{"prefixItems", `{"prefixItems": [{"type": "string"}]}`, []string{"prefixItems"}},
		{"exclusiveMinimum", `{"type": "number", "exclusiveMinimum": 0}`, []string{"exclusiveMinimum"}},
		{"exclusiveMaximum", `{"exclusiveMaximum": 10}`, []string{"exclusiveMaximum"}},
		{"multipleOf", `{"multipleOf": 2}`, []string{"multipleOf"}},
		{"uniqueItems", `{"uniqueItems": true}`, []string{"uniqueItems"}},
		{"contains", `{"contains": {"type": "string"}}`, []string{"contains"}},
		{"minProperties", `{"minProperties": 1}`, []string{"minProperties"}},
		{"propertyNames", `{"propertyNames": {"maxLength": 3}}`, []string{"propertyNames"}},
		{"dependentRequired", `{"dependentRequired": {"a": ["b"]}}`, []string{"dependentRequired"}},
		{"unevaluatedProperties", `{"unevaluatedProperties": false}`, []string{"unevaluatedProperties"}},
		{"a misspelt keyword", `{"maxlength": 3}`, []string{"maxlength"}},
		// Malformed values of supported keywords.
		{"minLength -1", `{"minLength": -1}`, []string{"minLength"}},
		{"minLength 1.5", `{"minLength": 1.5}`, []string{"minLength"}},
		{"minLength as a string", `{"minLength": "5"}`, []string{"minLength"}},
		{"maxLength null", `{"maxLength": null}`, []string{"maxLength"}},
		{"minItems -1", `{"minItems": -1}`, []string{"minItems"}},
		{"maxItems 2.5", `{"maxItems": 2.5}`, []string{"maxItems"}},
		{"type float", `{"type": "float"}`, []string{"type"}},
		{"type an empty list", `{"type": []}`, []string{"type"}},
		{"type a list with an unknown name", `{"type": ["string", "float"]}`, []string{"type"}},
		{"type a number", `{"type": 1}`, []string{"type"}},
		{"type an object", `{"type": {"name": "string"}}`, []string{"type"}},
		{"required not an array", `{"required": "a"}`, []string{"required"}},
		{"required with a number", `{"required": ["a", 1]}`, []string{"required"}},
		{"enum not an array", `{"enum": "a"}`, []string{"enum"}},
		{"pattern not a regex", `{"pattern": "("}`, []string{"pattern"}},
		{"pattern an unclosed class", `{"pattern": "[a-"}`, []string{"pattern"}},
		{"pattern not a string", `{"pattern": 1}`, []string{"pattern"}},
		{"minimum a string", `{"minimum": "1"}`, []string{"minimum"}},
		{"maximum null", `{"maximum": null}`, []string{"maximum"}},
		{"properties an array", `{"properties": [{"type": "string"}]}`, []string{"properties"}},
		{"a property schema that is a number", `{"properties": {"a": 1}}`, []string{"$.properties.a"}},
		{"a property schema that is null", `{"properties": {"a": null}}`, []string{"$.properties.a"}},
		{"additionalProperties a string", `{"additionalProperties": "no"}`, []string{"additionalProperties"}},
		{"items a string", `{"items": "integer"}`, []string{"$.items"}},
		{"a schema-valued additionalProperties inside items", `{"items": {"additionalProperties": {}}}`, []string{"additionalProperties", "$.items"}},
		// Not a schema at all.
		{"an array", `[{"type": "string"}]`, nil},
		{"a string", `"object"`, nil},
		{"a number", `1`, nil},
		{"null", `null`, nil},
		// At nested paths.
		{"format in a property", `{"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}`,
			[]string{"format", "$.properties.email"}},
		{"oneOf in items", `{"type": "array", "items": {"oneOf": [{"type": "string"}]}}`, []string{"oneOf", "$.items"}},
		{"malformed minLength deep down", `{"properties": {"a": {"items": {"properties": {"b": {"minLength": -1}}}}}}`,
			[]string{"minLength", "$.properties.a.items.properties.b"}},
		{"$ref under a key that needs quoting", `{"properties": {"odd key": {"$ref": "#"}}}`,
			[]string{"$ref", `$.properties["odd key"]`}},
		{"a bad pattern in items", `{"items": {"type": "string", "pattern": "a{2,1}"}}`, []string{"pattern", "$.items"}},
		{"an unknown keyword after good ones", `{"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "x-unit": "cents"}}}`,
			[]string{"x-unit", "$.properties.a"}},
	}
	callCases := make([]callCase, len(cases))
	for i, c := range cases {
		callCases[i] = callCase{name: c.name, sql: sqlRegister, args: []any{c.schema}, code: "CV011", mentions: c.mentions}
	}
	runCallCases(t, db, callCases)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.tools`)

	// The same keywords, well formed, are accepted: the refusals above are
	// about the keywords, not the tool.
	v := registerTestTool(t, db, "refused_tool", true, `{"type": "object", "title": "ok",
		"properties": {"email": {"type": "string", "pattern": "^[^@]+@[^@]+$", "minLength": 3, "maxLength": 254},
		               "odd key": {"type": ["string", "null"], "enum": ["a", null]},
		               "n": {"type": "number", "minimum": 0, "maximum": 1.5, "const": 1},
		               "list": {"type": "array", "minItems": 0, "maxItems": 3, "items": {"type": "integer"}}},
		"required": ["email"], "additionalProperties": false}`)
	requireEqual(t, "version of the well-formed schema", v, 1)

	// Keyword names are refused only where they are keywords: as property
	// names, in required, and inside const, enum, default and examples
	// values they are data.
	v = registerTestTool(t, db, "keyword_names_as_data", true, `{"type": "object",
		"properties": {"format": {"type": "string"}, "$ref": {}, "oneOf": {"enum": [{"$ref": "#"}]}},
		"required": ["format", "$ref"],
		"const": {"format": "x", "oneOf": []},
		"default": {"patternProperties": 1}, "examples": [{"$ref": "#"}]}`)
	requireEqual(t, "version of a schema with keyword names as data", v, 1)
}
