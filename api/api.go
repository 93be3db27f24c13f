// Package api holds Eventide's HTTP API contract, openapi.yaml (OpenAPI
// 3.0.3), embedded so that the binary serves the document it was built
// with: cmd/internal/httpapi answers GET /openapi.yaml with OpenAPIYAML.
//
// The spec describes every route cmd/internal/httpapi registers, each
// parameter with its limits, each response body and each RFC 9457 problem
// type; docs/http-api.md is its prose form, and the three change together.
//
// Tests hold the spec to the code with github.com/getkin/kin-openapi, a
// test-only dependency (no production code imports it): this package's test
// loads and validates the document; cmd/internal/httpapi's tests check that
// the handler's route table and the spec's paths are the same set, and
// validate the requests and responses of its API tests against the spec
// with kin-openapi's openapi3filter. kin-openapi was chosen because it is
// the maintained Go implementation of OpenAPI 3.0 that validates both the
// document and live HTTP exchanges against it, with no code generation.
package api

import _ "embed"

//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPIYAML returns the OpenAPI document, as YAML. The caller must not
// modify it.
func OpenAPIYAML() []byte { return openapiYAML }
