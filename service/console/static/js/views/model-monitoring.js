// The model page's monitoring card, from GET /v1/models/{id}/monitoring (docs/monitoring.md):
// a drift badge, PSI per feature as bars coloured by their reading, what moved (missing and
// unseen values), and the window's timeline (rows, prediction PSI, performance on feedback).

import { get } from "../api.js";
import { barChart, miniBars } from "../charts/bars.js";
import { lineChart } from "../charts/lines.js";
import { card, errorBox, h, number, replace, select, table, when } from "../dom.js";

// The usual reading of PSI (docs/monitoring.md): below 0.1 none, up to 0.25 moderate, above major.
const ORDER = ["none", "moderate", "major"];
const WINDOWS = [["24 hours", 24], ["7 days", 24 * 7], ["30 days", 24 * 30]];
const MOST_BARS = 30;

function worst(report) {
  const readings = [...report.features.map((f) => f.drift), report.prediction?.drift].filter(Boolean);
  if (!readings.length) return null;
  return readings.reduce((a, b) => (ORDER.indexOf(b) > ORDER.indexOf(a) ? b : a));
}

function badge(report) {
  const reading = worst(report);
  const text = reading === null ? "no reading" : reading === "none" ? "no drift" : `${reading} drift`;
  return h("span", { id: "drift-badge", class: `drift ${reading || "unknown"}`, title: "the worst PSI reading of the features and the predictions" }, text);
}

function psiBars(report) {
  const features = report.features.filter((f) => f.psi !== null).sort((a, b) => b.psi - a.psi);
  if (!features.length) return h("p", { class: "muted" }, "No logged row in this window to compare with training.");
  const items = features.slice(0, MOST_BARS).map((f) => ({ label: f.name, value: f.psi, tone: `drift-${f.drift}` }));
  if (report.prediction?.psi !== null && report.prediction?.psi !== undefined) {
    items.unshift({ label: "(prediction)", value: report.prediction.psi, tone: `drift-${report.prediction.drift}` });
  }
  return h("div", { id: "psi-chart" },
    barChart(items, { label: "PSI per feature", valueLabel: "PSI against the training rows (0.1 moderate, 0.25 major)" }),
    features.length > MOST_BARS ? h("p", { class: "small muted" }, `The ${MOST_BARS} features that moved most, of ${features.length}.`) : null);
}

function changes(report) {
  const rows = report.features
    .filter((f) => (f.unseen && f.unseen.count) || (f.missing_rate.live !== null && Math.abs(f.missing_rate.live - (f.missing_rate.training || 0)) >= 0.01))
    .map((f) => [
      f.name,
      `${number(100 * (f.missing_rate.training || 0), 3)}%`,
      f.missing_rate.live === null ? "—" : `${number(100 * f.missing_rate.live, 3)}%`,
      f.unseen ? number(f.unseen.count) : "—",
      f.unseen ? f.unseen.top.map((t) => `${t.value} (${t.count})`).join(", ") : "",
    ]);
  if (!rows.length) return null;
  return h("div", { id: "monitoring-changes" },
    h("h3", {}, "Missing and unseen values"),
    table(["feature", "missing, training", "missing, live", "unseen", "most frequent unseen"], rows, { numeric: [1, 2, 3] }));
}

function timeline(report, model) {
  const periods = report.timeline || [];
  if (!periods.length) return null;
  const end = Date.parse(report.window.until);
  // Hours before the window's end, so the x axis reads "-24 … 0" whatever the period.
  const xs = periods.map((p) => (Date.parse(p.until) - end) / 3_600_000);
  const metric = model.task === "classification" ? "accuracy" : "rmse";
  const scored = periods.some((p) => p[metric] !== null && p[metric] !== undefined);
  return h("div", { id: "monitoring-timeline" },
    h("h3", {}, `Performance over time (${metric} on rows with feedback)`),
    scored
      ? lineChart([{ name: metric, xs, ys: periods.map((p) => p[metric] ?? null) }], { xLabel: "hours before the window's end", yLabel: metric, label: `${metric} over time`, dots: true })
      : h("p", { class: "muted", id: "no-feedback" }, "No feedback in this window: send the true values with POST /v1/models/{ref}/feedback (model.feedback(ids, actuals)) to see performance here."),
    h("h3", {}, "Predictions over time"),
    // A chart of no point draws bare axes that read as "zero drift"; say why it is empty instead.
    periods.some((p) => p.prediction_psi !== null && p.prediction_psi !== undefined)
      ? lineChart([
        { name: "prediction PSI", xs, ys: periods.map((p) => p.prediction_psi) },
      ], { xLabel: "hours before the window's end", yLabel: "PSI", label: "prediction PSI over time", dots: true })
      : h("p", { class: "muted", id: "no-prediction-psi" }, "No prediction PSI in this window: no logged predictions to compare with the model's training baseline."),
    h("div", { class: "row small muted", id: "monitoring-volume" }, "Rows logged per period",
      miniBars(periods.map((p) => p.n_predictions), periods.map((p) => `${new Date(p.since).toLocaleString("en", { dateStyle: "short", timeStyle: "short" })}`))));
}

function summary(report, model) {
  const performance = report.performance || {};
  const metric = model.task === "classification" ? "accuracy" : "rmse";
  return h("div", { class: "spread" },
    h("p", { class: "small muted", id: "monitoring-summary" },
      `${number(report.n_predictions)} predictions logged from `, when(report.window.since), " to ", when(report.window.until),
      `; ${number(performance.n_labelled || 0)} with feedback`,
      performance[metric] !== undefined && performance[metric] !== null ? `, ${metric} ${number(performance[metric])}` : "",
      "."),
    badge(report));
}

/** The monitoring card, filled once the report comes (and again when the window changes). */
export function monitoringCard(model, signal) {
  const box = h("div", { id: "monitoring" }, h("p", { class: "muted" }, "Loading…"));
  const windowInput = select(WINDOWS.map(([label]) => label), { id: "monitoring-window", name: "window", "aria-label": "monitoring window" });

  async function load(hours) {
    replace(box, h("p", { class: "muted" }, "Loading…"));
    const since = new Date(Date.now() - hours * 3_600_000).toISOString();
    try {
      const report = await get(`/v1/models/${encodeURIComponent(model.id)}/monitoring?since=${encodeURIComponent(since)}`, { signal });
      if (!report.baseline) {
        replace(box, summary(report, model), h("p", { class: "muted" }, report.note), timeline(report, model));
        return;
      }
      replace(box, summary(report, model), psiBars(report), changes(report), timeline(report, model));
    } catch (error) {
      if (!signal.aborted) replace(box, errorBox(error));
    }
  }

  windowInput.addEventListener("change", () => load(WINDOWS.find(([label]) => label === windowInput.value)[1]));
  load(WINDOWS[0][1]);
  return card("Monitoring (live predictions against training)",
    h("div", { class: "row" }, h("label", { for: "monitoring-window" }, "Window"), windowInput), box);
}
