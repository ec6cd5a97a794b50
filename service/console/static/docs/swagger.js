// Starts the vendored Swagger UI from a file, not an inline script, so /docs keeps a CSP
// without 'unsafe-inline' for scripts.
const mount = document.getElementById("swagger-ui");
window.SwaggerUIBundle({
  url: mount.dataset.openapiUrl,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  // The default validator badge is an image from another site.
  validatorUrl: null,
  presets: [window.SwaggerUIBundle.presets.apis],
});
