// One job, live: its progress bar and stage follow the worker through long polls on
// GET /v1/jobs/{id}?wait=… (each answers at once when the job ends, else after a second with
// its state then), so the page never reloads and the server reads one row per second.

import { get, isAdmin } from "../api.js";
import { card, errorBox, facts, h, progressBar, replace, setProgress, shortId, status, when } from "../dom.js";
import { cancelButton, follow } from "../follow.js";

const ENDED = new Set(["succeeded", "failed", "cancelled"]);
const WAIT_SECONDS = 1;

export async function render(root, { params: [id] }, signal) {
  const path = `/v1/jobs/${encodeURIComponent(id)}`;
  let job = await get(path, { signal });
  const bar = progressBar("training progress");
  const percent = h("strong", { id: "job-percent" });
  const stage = h("span", { id: "job-stage", class: "muted" });
  const badge = h("span", { id: "job-status" });
  const details = h("div");
  const outcome = h("div", { id: "job-outcome" });
  const message = h("div");
  const cancel = cancelButton("job-cancel", path, show, message);

  function show(current) {
    job = current;
    replace(badge, status(job.status));
    percent.textContent = `${setProgress(bar, job.status === "succeeded" ? 1 : job.progress)}%`;
    stage.textContent = job.stage || (job.status === "queued" ? "waiting for a worker" : "");
    cancel.classList.toggle("hidden", !isAdmin() || ENDED.has(job.status));
    replace(details, facts([
      ["method", job.method],
      ["task", job.task],
      ["target", job.target],
      ["dataset", job.dataset_id ? h("a", { href: `#/datasets/${job.dataset_id}` }, shortId(job.dataset_id)) : "deleted"],
      ["attempts", job.attempts],
      ["created", when(job.created_at)],
      ["started", when(job.started_at)],
      ["finished", when(job.finished_at)],
      ...costFacts(job.resources),
    ]));
    if (job.status === "succeeded" && job.model_id) {
      replace(outcome, h("p", {}, h("a", { class: "button", href: `#/models/${job.model_id}`, id: "job-model" }, "Open the model")));
    } else if (job.status === "failed" && job.error) {
      replace(outcome, errorBox(`${job.error.code}: ${job.error.message}`));
    } else {
      replace(outcome);
    }
  }

  show(job);
  replace(
    root,
    h("h1", {}, "Job ", h("span", { class: "mono" }, job.name || shortId(job.id))),
    card(null, h("div", { class: "spread" }, h("div", { class: "row" }, badge, percent, stage), cancel), bar, outcome, message),
    card("Details", details),
  );
  // Not awaited: the page is shown (and interactive) now, and follows the job until it ends
  // or the person leaves (the signal aborts the poll in flight).
  follow({ read: () => get(`${path}?wait=${WAIT_SECONDS}`, { signal }), show, ended: () => ENDED.has(job.status), message, signal });
}

// What the ended fit cost (the job's resources; absent until it has ended).
function costFacts(resources) {
  if (!resources) return [];
  const mib = (resources.peak_rss_bytes / 2 ** 20).toFixed(0);
  const where = resources.backend === "dask" ? `dask (${resources.dask_workers ?? "?"} workers)` : "local";
  return [
    ["fit time", `${resources.wall_seconds.toFixed(1)} s wall, ${resources.cpu_seconds.toFixed(1)} s CPU`],
    ["fit peak memory", `${mib} MiB`],
    ["ran on", where],
  ];
}
