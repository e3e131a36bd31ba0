package api

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	swaggerFiles "github.com/swaggo/files/v2"
)

// The interactive docs page: Swagger UI's own files (swaggo/files), with a
// page and an initializer of ours that load /openapi.json. swaggo's
// http-swagger would generate the same, but it links the testing package
// into the binary (through golang.org/x/tools).

const docsIndex = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<title>kmirror API</title>
<link rel="stylesheet" type="text/css" href="./swagger-ui.css">
<link rel="icon" type="image/png" href="./favicon-32x32.png" sizes="32x32">
</head>
<body>
<div id="swagger-ui"></div>
<script src="./swagger-ui-bundle.js"></script>
<script src="./swagger-ui-standalone-preset.js"></script>
<script src="./swagger-initializer.js"></script>
</body>
</html>
`

const docsInitializer = `window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: "StandaloneLayout",
  });
};
`

// mountDocsPage serves the page under /docs/.
func mountDocsPage(r chi.Router) {
	static := http.StripPrefix("/docs/", http.FileServerFS(swaggerFiles.FS))
	r.Get("/docs/*", func(w http.ResponseWriter, r *http.Request) {
		switch name := strings.TrimPrefix(r.URL.Path, "/docs/"); name {
		case "", "index.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(docsIndex))
		case "swagger-initializer.js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			_, _ = w.Write([]byte(docsInitializer))
		default:
			if _, err := fs.Stat(swaggerFiles.FS, name); err != nil {
				writeProblem(w, r, kindNotFound, "no such file of the docs page", nil)
				return
			}
			static.ServeHTTP(w, r)
		}
	})
}
