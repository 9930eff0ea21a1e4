package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir/internal/flow"
)

// schema is the part of an OpenAPI schema object the check reads.
type schema struct {
	Ref        string             `json:"$ref"`
	Type       string             `json:"type"`
	Required   []string           `json:"required"`
	Properties map[string]*schema `json:"properties"`
	Items      *schema            `json:"items"`
	AllOf      []*schema          `json:"allOf"`
	Nullable   bool               `json:"nullable"`
	Enum       []any              `json:"enum"`
	// AdditionalProperties is false (closed object) or a schema.
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
}

type openAPIDoc struct {
	OpenAPI string `json:"openapi"`
	Paths   map[string]map[string]struct {
		Parameters []struct{ Name, In string } `json:"parameters"`
		Responses  map[string]struct {
			Ref     string `json:"$ref"`
			Content map[string]struct {
				Schema *schema `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
	} `json:"paths"`
	Components struct {
		Schemas   map[string]*schema `json:"schemas"`
		Responses map[string]struct {
			Content map[string]struct {
				Schema *schema `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
	} `json:"components"`
}

func (d *openAPIDoc) resolve(s *schema) *schema {
	for s != nil && s.Ref != "" {
		s = d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	return s
}

// validate checks v against s: types, required and enumerated values,
// closed objects, recursively; it returns the first mismatch.
func (d *openAPIDoc) validate(s *schema, v any, at string) error {
	s = d.resolve(s)
	if s == nil {
		return fmt.Errorf("%s: schema reference does not resolve", at)
	}
	if v == nil && s.Nullable { // OpenAPI 3.0's nullable allOf of a reference: null, or what the reference says
		return nil
	}
	for _, sub := range s.AllOf {
		if err := d.validate(sub, v, at); err != nil {
			return err
		}
	}
	if v == nil {
		if s.Nullable || s.Type == "" {
			return nil
		}
		return fmt.Errorf("%s: null, want %s", at, s.Type)
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, s.Enum)
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want object", at, v)
		}
		for _, k := range s.Required {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("%s: required %q missing", at, k)
			}
		}
		for k, x := range m {
			if p := s.Properties[k]; p != nil {
				if err := d.validate(p, x, at+"."+k); err != nil {
					return err
				}
			} else if string(s.AdditionalProperties) == "false" {
				return fmt.Errorf("%s: %q is not in the document", at, k)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want array", at, v)
		}
		for i, x := range a {
			if err := d.validate(s.Items, x, at+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %T, want string", at, v)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || s.Type == "integer" && f != float64(int64(f)) {
			return fmt.Errorf("%s: %v, want %s", at, v, s.Type)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want boolean", at, v)
		}
	}
	return nil
}

// TestOpenAPI keeps /api/v1/openapi.json true: every route the server
// registers is in the document and nothing else is; /api/v1/query's
// parameters are the ones the handler takes; and requests to every route
// (answers and errors) get a status the document lists, with a body of
// the documented content type that validates against its schema.
func TestOpenAPI(t *testing.T) {
	recs := make([]flow.Record, 2)
	for i := range recs {
		flow.SetAddr4(&recs[i].Key.SrcAddr, []byte{127, 0, 0, 1})
		flow.SetAddr4(&recs[i].Key.DstAddr, []byte{127, 0, 0, 2})
		recs[i].Key.IPVersion, recs[i].Key.Proto, recs[i].Bytes, recs[i].Packets = 4, flow.ProtoUDP, 100, 1
	}
	s, ts := newTestServer(t, Config{})
	_, tsLive := newTestServer(t, Config{Backend: &blockingBackend{live: recs, notReady: fmt.Errorf("down")}})
	code, h, raw := get(t, ts, "/api/v1/openapi.json")
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("openapi.json: %d %v", code, h)
	}
	var doc openAPIDoc
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("not an OpenAPI 3 document: %v %q", err, doc.OpenAPI)
	}

	var routes []string
	for _, r := range s.Routes() {
		routes = append(routes, r.Path)
		if _, ok := doc.Paths[r.Path]["get"]; !ok {
			t.Errorf("route %s is not in the document", r.Path)
		}
	}
	for p := range doc.Paths {
		if !slices.Contains(routes, p) {
			t.Errorf("the document lists %s, which the server does not answer", p)
		}
	}
	var params []string
	for _, p := range doc.Paths["/api/v1/query"]["get"].Parameters {
		params = append(params, p.Name)
	}
	if slices.Sort(params); !slices.Equal(params, slices.Sorted(slices.Values(queryParams))) {
		t.Errorf("documented query parameters %v, the handler takes %v", params, queryParams)
	}
	params = params[:0]
	for _, p := range doc.Paths["/api/v1/topseries"]["get"].Parameters {
		params = append(params, p.Name)
	}
	if slices.Sort(params); !slices.Equal(params, slices.Sorted(slices.Values(queryParams))) { // the same, resolution required
		t.Errorf("documented topseries parameters %v, the handler takes %v", params, queryParams)
	}

	requests := []struct {
		ts    string // "" the store server, "live" the one with live flows
		route string
		path  string
	}{
		{"", "/api/v1/query", "/api/v1/query?group=sip"},
		{"", "/api/v1/query", "/api/v1/query?group=time,iface&resolution=1h&limit=0"},
		{"", "/api/v1/query", "/api/v1/query?group=sip&condition=dport+%3D"},
		{"", "/api/v1/query", "/api/v1/query?group=nope"},
		{"", "/api/v1/query", "/api/v1/query?group=sip&live=1"},
		{"", "/api/v1/topseries", "/api/v1/topseries?group=sip&resolution=1h"},
		{"", "/api/v1/topseries", "/api/v1/topseries?group=sip&resolution=1h&condition=dport+%3D+1"},
		{"", "/api/v1/topseries", "/api/v1/topseries?group=sip"},
		{"", "/api/v1/live", "/api/v1/live"},
		{"live", "/api/v1/live", "/api/v1/live?limit=1"},
		{"", "/api/v1/live", "/api/v1/live?x=1"},
		{"", "/api/v1/meta", "/api/v1/meta"},
		{"live", "/api/v1/meta", "/api/v1/meta"},
		{"", "/api/v1/meta", "/api/v1/meta?x=1"},
		{"", "/api/v1/openapi.json", "/api/v1/openapi.json"},
		{"", "/healthz", "/healthz"},
		{"", "/readyz", "/readyz"},
		{"live", "/readyz", "/readyz"},
		{"", "/", "/"},
		{"", "/", "/missing.js"},
	}
	seen := map[string]bool{}
	for _, r := range requests {
		srv := ts
		if r.ts == "live" {
			srv = tsLive
		}
		code, h, body := get(t, srv, r.path)
		seen[r.route] = true
		op := doc.Paths[r.route]["get"]
		resp, ok := op.Responses[strconv.Itoa(code)]
		if !ok {
			t.Errorf("%s: status %d is not documented", r.path, code)
			continue
		}
		content := resp.Content
		if resp.Ref != "" {
			content = doc.Components.Responses[strings.TrimPrefix(resp.Ref, "#/components/responses/")].Content
		}
		ctype, _, _ := strings.Cut(h.Get("Content-Type"), ";")
		media, ok := content[ctype]
		if !ok {
			t.Errorf("%s: %d answered %s, the document says %v", r.path, code, ctype, content)
			continue
		}
		switch ctype {
		case "application/json":
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Errorf("%s: %v", r.path, err)
			} else if err := doc.validate(media.Schema, v, r.path); err != nil {
				t.Errorf("%d %v", code, err)
			}
		case "application/x-ndjson":
			for line := range strings.Lines(string(body)) {
				var v any
				if err := json.Unmarshal([]byte(line), &v); err != nil {
					t.Errorf("%s: %v", r.path, err)
				} else if err := doc.validate(media.Schema, v, r.path); err != nil {
					t.Errorf("%v", err)
				}
			}
		}
	}
	for _, r := range routes {
		if !seen[r] {
			t.Errorf("route %s is not exercised by the check", r)
		}
	}
}
