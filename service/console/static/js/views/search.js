// One search, live: status, progress and the leaderboard follow the workers through long
// polls on GET /v1/searches/{id}?wait=… (each answers at once when the search ends, else after
// a second with its state then, as the job page's do), until the search ends or the person
// leaves (the signal aborts the poll in flight).

import { get, isAdmin } from "../api.js";
import { card, errorBox, facts, h, number, progressBar, replace, setProgress, shortId, status, table, when } from "../dom.js";
import { cancelButton, follow } from "../follow.js";
import { nameLink } from "./registry.js";
import { ENDED, searchTitle } from "./searches.js";

const WAIT_SECONDS = 1;

function paramsText(params, kind) {
  // A stack's members are models: their methods say enough (each links from its own row).
  const shown = kind === "stack" && Array.isArray(params?.members)
    ? { ...params, members: params.members.map((m) => m.method || shortId(m.model_id)) }
    : params;
  const pairs = Object.entries(shown || {});
  if (!pairs.length) return h("span", { class: "muted" }, "defaults");
  return h("span", { class: "mono small" }, pairs.map(([k, v]) => `${k}=${typeof v === "number" ? number(v) : JSON.stringify(v)}`).join(", "));
}

function score(metric) {
  if (!metric) return "—";
  return metric.std === null || metric.std === undefined ? number(metric.mean) : `${number(metric.mean)} ± ${number(metric.std, 2)}`;
}

function leaderboardTable(search) {
  if (!search.leaderboard.length) {
    return h("p", { class: "muted" }, ENDED.has(search.status) ? "No candidate finished." : "No candidate has finished yet.");
  }
  const rungs = search.leaderboard.some((row) => row.iter > 0 || row.n_resources !== null);
  const rows = search.leaderboard.map((row) => [
    h("a", { href: `#/models/${row.model_id}`, class: "rank", title: "open the model" }, `#${row.rank}`),
    h("span", {}, row.method, row.kind === "stack" ? h("span", { class: "tag" }, "stack") : null),
    paramsText(row.params, row.kind),
    score(row.metric),
    row.fit_seconds === null ? "—" : number(row.fit_seconds, 3),
    rungs ? `${row.iter} · ${row.n_resources === null ? "all" : number(row.n_resources)}` : null,
    h("a", { href: `#/models/${row.model_id}`, class: "mono small" }, shortId(row.model_id)),
  ].filter((cell) => cell !== null));
  const headers = ["rank", "method", "params", `${search.metric} (${search.direction === "maximize" ? "higher" : "lower"} is better)`, "fit s", rungs ? "rung · rows" : null, "model"].filter(Boolean);
  return table(headers, rows, { numeric: [3, 4] });
}

function outcome(search) {
  const parts = [];
  if (search.best_model_id) parts.push(h("a", { class: "button", href: `#/models/${search.best_model_id}`, id: "search-best" }, "Open the best model"));
  if (search.stack_model_id) parts.push(h("a", { href: `#/models/${search.stack_model_id}` }, "the stacked ensemble"));
  const registration = search.registration;
  let registered = null;
  if (registration?.status === "registered") {
    registered = h("p", {}, "Registered as ", nameLink(registration.name, `${registration.name} version ${registration.version}`), " (alias candidate).");
  } else if (registration?.status === "failed") {
    registered = errorBox(`Registering as ${registration.name} failed: ${registration.detail || "no detail"}`);
  } else if (registration) {
    registered = h("p", { class: "muted" }, `Will register the best model as ${registration.name}.`);
  }
  const notes = search.notes.length ? h("ul", { class: "small" }, search.notes.map((note) => h("li", {}, note))) : null;
  return [parts.length ? h("div", { class: "row" }, parts) : null, registered, notes];
}

function details(search) {
  const budget = search.budget || {};
  return facts([
    ["strategy", search.auto ? `auto (${search.strategy})` : search.strategy],
    ["metric", `${search.metric} (${search.direction})`],
    ["dataset", search.dataset_id ? h("a", { href: `#/datasets/${search.dataset_id}` }, shortId(search.dataset_id)) : "deleted"],
    ["target", h("span", { class: "mono" }, search.target)],
    ["task", search.task],
    ["folds", search.folds],
    ["budget", [budget.max_models ? `${budget.max_models} models` : null, budget.max_seconds ? `${budget.max_seconds} s` : null].filter(Boolean).join(", ") || "none"],
    ["stack", search.stack ? "yes" : "no"],
    ["register as", search.register_as || undefined],
    ["seed", search.seed],
    ["jobs", h("a", { href: "#/jobs" }, Object.entries(search.jobs).filter(([, n]) => n).map(([s, n]) => `${n} ${s}`).join(", ") || "none")],
    ["created", when(search.created_at)],
    ["finished", when(search.finished_at)],
    ["id", h("span", { class: "mono small" }, search.id)],
  ]);
}

export async function render(root, { params: [id] }, signal) {
  const path = `/v1/searches/${encodeURIComponent(id)}`;
  let search = await get(path, { signal });
  const bar = progressBar("search progress");
  const percent = h("strong", { id: "search-percent" });
  const counts = h("span", { id: "search-counts", class: "muted" });
  const badge = h("span", { id: "search-status" });
  const result = h("div", { id: "search-outcome" });
  const board = h("div", { id: "leaderboard" });
  const detail = h("div");
  const spaces = h("pre", { class: "mono small scroll" });
  const message = h("div");
  let shown = "";
  const cancel = cancelButton("search-cancel", path, show, message, "Cancel what is left of this search? Finished candidates are kept.");

  function show(current) {
    search = current;
    replace(badge, status(search.status));
    percent.textContent = `${setProgress(bar, search.status === "succeeded" ? 1 : search.progress)}%`;
    const { running, queued } = search.jobs;
    counts.textContent = `${search.n_models} model(s)` + (ENDED.has(search.status) ? "" : ` · ${running} running, ${queued} queued`)
      + (search.status === "stacking" ? " · building the ensemble" : "");
    cancel.classList.toggle("hidden", !isAdmin() || ENDED.has(search.status));
    // The leaderboard is rebuilt only when it changed, so reading it is not disturbed.
    const key = JSON.stringify(search.leaderboard);
    if (key !== shown) {
      shown = key;
      replace(board, leaderboardTable(search));
    }
    replace(result, outcome(search));
    replace(detail, details(search));
    spaces.textContent = JSON.stringify({ candidates: search.candidates, plan: search.plan }, null, 2);
  }

  show(search);
  replace(
    root,
    h("p", { class: "small" }, h("a", { href: "#/searches" }, "← Searches")),
    h("h1", {}, "Search ", h("span", { class: "mono" }, searchTitle(search))),
    card(null, h("div", { class: "spread" }, h("div", { class: "row" }, badge, percent, counts), cancel), bar, result, message),
    card("Leaderboard", h("p", { class: "small muted" }, `Best first; ${search.folds}-fold cross-validation on the same folds for every candidate. Each row opens its model.`), board),
    card("Details", detail, h("details", {}, h("summary", {}, "Spaces and plan"), spaces)),
  );
  follow({ read: () => get(`${path}?wait=${WAIT_SECONDS}`, { signal }), show, ended: () => ENDED.has(search.status), message, signal });
}
