package api

import (
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestSpecIsValid loads the embedded document and validates it as
// OpenAPI 3.0, including that every example and default fits its schema.
func TestSpecIsValid(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPIYAML())
	if err != nil {
		t.Fatalf("cannot load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation(), openapi3.EnableSchemaDefaultsValidation(), openapi3.EnableSchemaPatternValidation()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if v := doc.OpenAPI; len(v) < 4 || v[:4] != "3.0." {
		t.Fatalf("openapi: %q, want 3.0.x", v)
	}
	for path, item := range doc.Paths.Map() {
		if item.Get == nil {
			t.Errorf("%s: no GET operation; every route of the API is GET", path)
		}
		if len(item.Operations()) != 1 {
			t.Errorf("%s: %d operations, want only GET (HEAD is documented in info.description)", path, len(item.Operations()))
		}
	}
}
