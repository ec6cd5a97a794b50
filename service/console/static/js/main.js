// The console's entry: a hash router (#/models/<id>) that loads each page's module on first
// visit, so the first page downloads only what it shows. A page module exports
// render(root, params, signal); `signal` aborts when the person leaves the page, which ends
// its long polls.

import { currentKey, currentRole, isAdmin, keysRequired, signOut } from "./api.js";
import { errorBox, h, replace } from "./dom.js";

// Each route: a pattern over the hash path, the page module, and the nav section it lights.
const ROUTES = [
  [/^\/?$/, "./views/datasets.js", "datasets"],
  [/^\/datasets$/, "./views/datasets.js", "datasets"],
  [/^\/datasets\/([^/]+)$/, "./views/dataset.js", "datasets"],
  [/^\/train$/, "./views/train.js", "train"],
  [/^\/jobs$/, "./views/jobs.js", "jobs"],
  [/^\/jobs\/([^/]+)$/, "./views/job.js", "jobs"],
  [/^\/models$/, "./views/models.js", "models"],
  [/^\/models\/([^/]+)$/, "./views/model.js", "models"],
  [/^\/registered-models$/, "./views/registered-models.js", "registry"],
  [/^\/registered-models\/([^/]+)$/, "./views/registered-model.js", "registry"],
  [/^\/searches$/, "./views/searches.js", "searches"],
  [/^\/searches\/new$/, "./views/search-new.js", "searches"],
  [/^\/searches\/([^/]+)$/, "./views/search.js", "searches"],
  [/^\/login$/, "./views/login.js", null],
];

const view = document.getElementById("view");
let leaving = null;

function parseHash() {
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  return { path: path || "/", query: new URLSearchParams(query) };
}

function showIdentity() {
  const who = document.getElementById("who");
  document.querySelectorAll("[data-admin]").forEach((link) => link.classList.toggle("hidden", !isAdmin()));
  if (!keysRequired || !currentKey()) {
    replace(who);
    return;
  }
  const out = h("button", { class: "plain", type: "button", onclick: () => {
    signOut();
    location.hash = "#/login";
  } }, "Sign out");
  replace(who, h("span", {}, `${currentRole()} key`), out);
}

async function route() {
  leaving?.abort();
  leaving = new AbortController();
  const { signal } = leaving;
  const { path, query } = parseHash();
  if (keysRequired && !currentKey() && path !== "/login") {
    location.replace(`#/login?next=${encodeURIComponent(location.hash || "#/")}`);
    return;
  }
  showIdentity();
  const [pattern, module, section] = ROUTES.find(([re]) => re.test(path)) || [];
  document.querySelectorAll("#nav a[data-section]").forEach((link) => {
    if (link.dataset.section === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  });
  if (!pattern) {
    replace(view, h("h1", {}, "Not found"), h("p", {}, "No console page is at this address. ", h("a", { href: "#/" }, "Datasets")));
    return;
  }
  const params = [...path.match(pattern).slice(1).map(decodeURIComponent)];
  try {
    const page = await import(module);
    if (signal.aborted) return;
    await page.render(view, { params, query }, signal);
  } catch (error) {
    if (signal.aborted || error?.name === "AbortError") return;
    replace(view, errorBox(error));
  }
  if (!signal.aborted && !document.documentElement.dataset.ready) {
    // The first page is interactive: what the speed test reads (performance.getEntriesByName).
    performance.mark("coppice:ready");
    document.documentElement.dataset.ready = "true";
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("coppice:signed-out", () => {
  location.hash = `#/login?next=${encodeURIComponent(location.hash)}`;
});
route();
