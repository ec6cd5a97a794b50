// Starts the vendored ReDoc from a file, not an inline script. No web fonts: ReDoc's page
// template would fetch them from another site, so the system fonts are used.
const mount = document.getElementById("redoc");
window.Redoc.init(mount.dataset.openapiUrl, { hideDownloadButton: false }, mount);
