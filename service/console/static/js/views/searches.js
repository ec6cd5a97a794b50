// Searches: every hyper-parameter search with its status, progress and best model, newest
// first; read again every two seconds while one is running.

import { get, isAdmin } from "../api.js";
import { card, h, number, pager, progressBar, replace, setProgress, shortId, status, table, when } from "../dom.js";
import { refreshing } from "../follow.js";

const PAGE = 50;
const REFRESH_MS = 2000;
const STATUSES = ["", "running", "stacking", "succeeded", "failed", "cancelled"];
export const ENDED = new Set(["succeeded", "failed", "cancelled"]);

export function searchTitle(search) {
  return search.name || `${search.auto ? "auto" : search.strategy} ${shortId(search.id)}`;
}

export async function render(root, route, signal) {
  await refreshing(() => list(root, route, signal), (page) => page.items.some((search) => !ENDED.has(search.status)), signal, REFRESH_MS);
}

async function list(root, { query }, signal) {
  const offset = Number(query.get("offset") || 0);
  const wanted = query.get("status") || "";
  const filter = wanted ? `&status=${encodeURIComponent(wanted)}` : "";
  const page = await get(`/v1/searches?limit=${PAGE}&offset=${offset}${filter}`, { signal });
  const rows = page.items.map((search) => {
    const bar = progressBar(`progress of search ${shortId(search.id)}`);
    bar.classList.add("small");
    setProgress(bar, search.status === "succeeded" ? 1 : search.progress);
    return [
      h("a", { href: `#/searches/${search.id}` }, searchTitle(search)),
      status(search.status),
      bar,
      search.auto ? `auto (${search.strategy})` : search.strategy,
      h("span", { class: "mono small" }, search.target),
      search.metric,
      number(search.n_models),
      search.best_model_id ? h("a", { href: `#/models/${search.best_model_id}` }, "best model") : "",
      when(search.created_at),
    ];
  });
  const filters = h("p", { class: "row small" }, "Show:", STATUSES.map((value) => value === wanted
    ? h("strong", {}, value || "all")
    : h("a", { href: value ? `#/searches?status=${value}` : "#/searches" }, value || "all")));
  replace(
    root,
    h("div", { class: "spread" }, h("h1", {}, "Searches"),
      isAdmin() ? h("a", { class: "button", href: "#/searches/new", id: "search-new" }, "New search") : null),
    card(`${number(page.total)} search(es)`, filters,
      page.items.length
        ? h("div", { id: "searches" }, table(["search", "status", "progress", "strategy", "target", "metric", "models", "", "created"], rows, { numeric: [6] }))
        : h("p", { class: "muted" }, "No searches yet."),
      pager(wanted ? `#/searches?status=${wanted}` : "#/searches", offset, PAGE, page.total)),
  );
  return page;
}
