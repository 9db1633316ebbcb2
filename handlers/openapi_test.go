package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"codeauth/handlers/betterauth"
	"codeauth/internal/testkit"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	recordedMu sync.Mutex
	recorded   []testkit.Recorded
)

// TestMain records every /api answer the tests receive and, once they pass, checks each one
// against the OpenAPI document: its status must be described for its operation, and its JSON
// body must match the schema.
func TestMain(m *testing.M) {
	testkit.RecordResponses(func(r testkit.Recorded) {
		recordedMu.Lock()
		recorded = append(recorded, r)
		recordedMu.Unlock()
	})
	code := m.Run()
	if code == 0 {
		if problems, checked := checkRecorded(); len(problems) > 0 {
			fmt.Fprintf(os.Stderr, "--- FAIL: OpenAPI check of %d recorded answers\n", checked)
			for _, p := range problems {
				fmt.Fprintln(os.Stderr, "    "+p)
			}
			code = 1
		} else if os.Getenv("OPENAPI_VERBOSE") != "" {
			fmt.Fprintf(os.Stderr, "OpenAPI check: %d answers match\n", checked)
		}
	}
	os.Exit(code)
}

type openAPIDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

func loadOpenAPI(t testing.TB) openAPIDoc {
	var doc openAPIDoc
	if err := json.Unmarshal(betterauth.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// escapePointer escapes a JSON pointer token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// checkRecorded validates the recorded answers and returns the problems and the number checked.
func checkRecorded() ([]string, int) {
	var doc openAPIDoc
	json.Unmarshal(betterauth.OpenAPI(), &doc)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(betterauth.OpenAPI()))
	if err != nil {
		return []string{err.Error()}, 0
	}
	if err := c.AddResource("openapi.json", raw); err != nil {
		return []string{err.Error()}, 0
	}
	schemas := map[string]*jsonschema.Schema{}
	seen := map[string]bool{}
	var problems []string
	recordedMu.Lock()
	defer recordedMu.Unlock()
	checked := 0
	for _, r := range recorded {
		ops, ok := doc.Paths[r.Path]
		if !ok || r.Method == "HEAD" || r.Method == "OPTIONS" {
			continue // unknown paths are 404s, outside any operation
		}
		method := strings.ToLower(r.Method)
		var op struct {
			Responses map[string]json.RawMessage `json:"responses"`
		}
		if err := json.Unmarshal(ops[method], &op); err != nil || op.Responses == nil {
			continue // a method the path does not have: 405
		}
		status := strconv.Itoa(r.Status)
		base := "openapi.json#/paths/" + escapePointer(r.Path) + "/" + method + "/responses/"
		answer, ok := op.Responses[status]
		if !ok {
			if answer, ok = op.Responses["default"]; !ok {
				problems = append(problems, fmt.Sprintf("%s %s answered %d, which the document does not describe", r.Method, r.Path, r.Status))
				continue
			}
			status = "default"
		}
		pointer := base + status
		var ref struct {
			Ref string `json:"$ref"`
		}
		json.Unmarshal(answer, &ref)
		if name, isRef := strings.CutPrefix(ref.Ref, "#/components/responses/"); isRef {
			answer = doc.Components.Responses[name]
			pointer = "openapi.json#/components/responses/" + escapePointer(name)
		}
		var described struct {
			Content map[string]json.RawMessage `json:"content"`
		}
		json.Unmarshal(answer, &described)
		if _, hasJSON := described.Content["application/json"]; !hasJSON {
			continue // no body to check (a redirect)
		}
		if !strings.HasPrefix(r.ContentType, "application/json") {
			problems = append(problems, fmt.Sprintf("%s %s answered %d as %q, not JSON", r.Method, r.Path, r.Status, r.ContentType))
			continue
		}
		pointer += "/content/application~1json/schema"
		schema, ok := schemas[pointer]
		if !ok {
			if schema, err = c.Compile(pointer); err != nil {
				problems = append(problems, fmt.Sprintf("compiling %s: %v", pointer, err))
				continue
			}
			schemas[pointer] = schema
		}
		body, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s %d: body is not JSON: %s", r.Method, r.Path, r.Status, r.Body))
			continue
		}
		checked++
		if err := schema.Validate(body); err != nil {
			key := fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Status)
			if !seen[key] {
				seen[key] = true
				problems = append(problems, fmt.Sprintf("%s: %s does not match: %v", key, r.Body, err))
			}
		}
	}
	sort.Strings(problems)
	return problems, checked
}

// Every /api route of the application is described, and every described operation exists.
func TestOpenAPI_CoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	e := testkit.New(t, testkit.SQLite)
	registered := map[string]bool{}
	for _, route := range e.App.GetRoutes(true) {
		if !strings.HasPrefix(route.Path, "/api/") || route.Method == "HEAD" || route.Method == "OPTIONS" {
			continue
		}
		key := route.Method + " " + route.Path
		registered[key] = true
		if _, ok := doc.Paths[route.Path][strings.ToLower(route.Method)]; !ok {
			t.Errorf("%s is not in openapi.json", key)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if key := strings.ToUpper(method) + " " + path; !registered[key] {
				t.Errorf("openapi.json describes %s, which is not a route", key)
			}
		}
	}
	r := e.Get("/api/openapi.json")
	var served map[string]any
	r.Decode(t, &served)
	if served["openapi"] != "3.1.0" {
		t.Fatalf("served document: %v", served["openapi"])
	}
}
