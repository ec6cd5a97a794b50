// Jobs: every training job with its status and progress, newest first.

import { get } from "../api.js";
import { card, h, number, pager, progressBar, replace, setProgress, shortId, status, table, when } from "../dom.js";
import { refreshing } from "../follow.js";

const PAGE = 50;
// While a listed job is queued or running, the list is read again this often.
const REFRESH_MS = 2000;
const STATUSES = ["", "queued", "running", "succeeded", "failed", "cancelled"];

export async function render(root, route, signal) {
  await refreshing(() => list(root, route, signal), (page) => page.items.some((job) => job.status === "queued" || job.status === "running"), signal, REFRESH_MS);
}

async function list(root, { query }, signal) {
  const offset = Number(query.get("offset") || 0);
  const wanted = query.get("status") || "";
  const filter = wanted ? `&status=${encodeURIComponent(wanted)}` : "";
  const page = await get(`/v1/jobs?limit=${PAGE}&offset=${offset}${filter}`, { signal });
  const rows = page.items.map((job) => {
    const bar = progressBar(`progress of job ${shortId(job.id)}`);
    bar.classList.add("small");
    setProgress(bar, job.progress);
    return [
      h("a", { href: `#/jobs/${job.id}` }, job.name || shortId(job.id)),
      status(job.status),
      h("div", { class: "stack" }, bar, h("span", { class: "small muted" }, job.stage || "")),
      job.method,
      job.task,
      when(job.created_at),
      job.model_id ? h("a", { href: `#/models/${job.model_id}` }, "model") : "",
    ];
  });
  const filters = h("p", { class: "row small" }, "Show:", STATUSES.map((value) => value === wanted
    ? h("strong", {}, value || "all")
    : h("a", { href: value ? `#/jobs?status=${value}` : "#/jobs" }, value || "all")));
  replace(
    root,
    h("h1", {}, "Jobs"),
    card(`${number(page.total)} job(s)`, filters,
      page.items.length ? table(["job", "status", "progress", "method", "task", "created", ""], rows) : h("p", { class: "muted" }, "No jobs yet."),
      pager(wanted ? `#/jobs?status=${wanted}` : "#/jobs", offset, PAGE, page.total)),
  );
  return page;
}
