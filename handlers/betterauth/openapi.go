package betterauth

import (
	_ "embed"

	"github.com/gofiber/fiber/v2"
)

// openAPI is the OpenAPI 3.1 description of the JSON API. The test suite checks that every /api
// route is in it and that every answer the tests receive matches its schemas.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the JSON API.
func OpenAPI() []byte { return openAPI }

// openAPIDocument is GET /api/openapi.json.
func openAPIDocument(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(openAPI)
}
