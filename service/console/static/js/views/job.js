// One job, live: its progress bar and stage follow the worker through long polls on
// GET /v1/jobs/{id}?wait=… (each answers at once when the job ends, else after a second with
// its state then), so the page never reloads and the server reads one row per second.

import { ApiError, get, isAdmin, post } from "../api.js";
import { card, errorBox, facts, h, progressBar, replace, setProgress, shortId, status, when } from "../dom.js";

const ENDED = new Set(["succeeded", "failed", "cancelled"]);
const WAIT_SECONDS = 1;

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

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
  const cancel = h("button", { type: "button", class: "danger", id: "job-cancel", onclick: async () => {
    cancel.disabled = true;
    try {
      show(await post(`${path}/cancel`));
    } catch (error) {
      replace(message, errorBox(error));
    }
  } }, "Cancel");

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
  follow(path, () => job, show, message, signal);
}

async function follow(path, current, show, message, signal) {
  while (!ENDED.has(current().status) && !signal.aborted) {
    try {
      show(await get(`${path}?wait=${WAIT_SECONDS}`, { signal }));
      replace(message);
    } catch (error) {
      if (signal.aborted) return;
      // The server restarting or the network blinking: say so, and keep following the job.
      replace(message, errorBox(error instanceof ApiError ? error : "Lost contact with the server; retrying…"));
      await sleep(2000, signal);
    }
  }
}
