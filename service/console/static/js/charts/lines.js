// Line charts (learning curves, ROC curves) and scatter plots (residuals).

import { PALETTE, extent, frame, legend, s } from "./svg.js";

// A browser draws a path of a few hundred points at once; thousands of iterations (a long
// boosting run) would only slow the page (MLflow's chart view froze on 10,000 steps).
const MAX_POINTS = 600;
const MAX_DOTS = 2000;

function every(count, limit) {
  return Math.max(1, Math.ceil(count / limit));
}

/** Points of one series as SVG path data; nulls and non-finite values leave gaps. */
function pathData(xs, ys, x, y) {
  const stride = every(xs.length, MAX_POINTS);
  let data = "";
  let pen = "M";
  for (let i = 0; i < xs.length; i += 1) {
    if (i % stride !== 0 && i !== xs.length - 1) continue;
    const value = ys[i];
    if (value === null || value === undefined || !Number.isFinite(value)) {
      pen = "M";
      continue;
    }
    data += `${pen}${x(xs[i]).toFixed(1)},${y(value).toFixed(1)}`;
    pen = "L";
  }
  return data;
}

/**
 * series: [{name, xs, ys}]; options: xLabel, yLabel, label, x/y domains (optional),
 * diagonal (draw y = x, for ROC curves), dots (a dot on each point too: short series with
 * gaps, whose lone points a line would not show). Returns an element holding legend and chart.
 */
export function lineChart(series, { xLabel, yLabel, label, x, y, diagonal = false, dots = false } = {}) {
  const shown = series.filter((one) => one.ys.some((v) => v !== null && Number.isFinite(v)));
  const chart = frame({
    x: x || extent(shown.flatMap((one) => one.xs)),
    y: y || extent(shown.flatMap((one) => one.ys)),
    xLabel,
    yLabel,
    label,
  });
  if (diagonal) {
    chart.plot.append(s("line", { class: "diag", x1: chart.x(0), y1: chart.y(0), x2: chart.x(1), y2: chart.y(1) }));
  }
  shown.forEach((one, index) => {
    chart.plot.append(s("path", { class: `line s${index % PALETTE}`, d: pathData(one.xs, one.ys, chart.x, chart.y) }, s("title", {}, one.name)));
    if (!dots) return;
    const group = s("g", { class: `s${index % PALETTE}` });
    one.xs.forEach((px, i) => {
      const value = one.ys[i];
      if (value === null || value === undefined || !Number.isFinite(value)) return;
      group.append(s("circle", { class: "dot", cx: chart.x(px).toFixed(1), cy: chart.y(value).toFixed(1), r: 3 },
        s("title", {}, `${one.name}: ${Number(value.toPrecision(4))}`)));
    });
    chart.plot.append(group);
  });
  const box = document.createElement("div");
  box.append(legend(shown.map((one) => one.name)), chart.svg);
  return box;
}

/**
 * ROC curves on the unit square with the chance diagonal: curves are [{name, fpr, tpr}], each
 * drawn as given (the API's are thinned already; rocCurve's are a file's every threshold).
 */
export function rocChart(curves, { label = "ROC curve" } = {}) {
  const series = curves.map(({ name, fpr, tpr }) => ({ name, xs: fpr, ys: tpr }));
  return lineChart(series, { x: [0, 1], y: [0, 1], diagonal: true, xLabel: "false positive rate", yLabel: "true positive rate", label });
}

/** A scatter of (xs[i], ys[i]); `zeroLine` draws y = 0 (residual plots). */
export function scatter(xs, ys, { xLabel, yLabel, label, zeroLine = false } = {}) {
  const chart = frame({ x: extent(xs), y: extent(ys, { zero: zeroLine }), xLabel, yLabel, label });
  if (zeroLine) {
    const [lo, hi] = extent(xs);
    chart.plot.append(s("line", { class: "diag", x1: chart.x(lo), x2: chart.x(hi), y1: chart.y(0), y2: chart.y(0) }));
  }
  const stride = every(xs.length, MAX_DOTS);
  const dots = s("g", { class: "s0" });
  for (let i = 0; i < xs.length; i += stride) {
    if (!Number.isFinite(xs[i]) || !Number.isFinite(ys[i])) continue;
    dots.append(s("circle", { class: "dot", cx: chart.x(xs[i]).toFixed(1), cy: chart.y(ys[i]).toFixed(1), r: 2.5 }));
  }
  chart.plot.append(dots);
  return chart.svg;
}

/**
 * The ROC curve of scores against a binary truth: {fpr, tpr, auc}. Ties in the score move
 * both rates at once (one diagonal step), as scikit-learn's roc_curve draws them.
 */
export function rocCurve(scores, positives) {
  const order = scores.map((_, i) => i).sort((a, b) => scores[b] - scores[a]);
  const totalPositive = positives.filter(Boolean).length;
  const totalNegative = positives.length - totalPositive;
  const fpr = [0];
  const tpr = [0];
  let truePositive = 0;
  let falsePositive = 0;
  for (let k = 0; k < order.length; k += 1) {
    if (positives[order[k]]) truePositive += 1;
    else falsePositive += 1;
    const tied = k + 1 < order.length && scores[order[k + 1]] === scores[order[k]];
    if (tied) continue;
    fpr.push(totalNegative ? falsePositive / totalNegative : 0);
    tpr.push(totalPositive ? truePositive / totalPositive : 0);
  }
  let auc = 0;
  for (let i = 1; i < fpr.length; i += 1) auc += ((fpr[i] - fpr[i - 1]) * (tpr[i] + tpr[i - 1])) / 2;
  return { fpr, tpr, auc: totalPositive && totalNegative ? auc : null };
}
