package api

import _ "embed"

// openAPI is the OpenAPI 3 document of the API, written by hand and kept
// true by TestOpenAPI (every route, parameter and response shape).
//
//go:embed openapi.json
var openAPI []byte
