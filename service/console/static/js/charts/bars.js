// Bar charts (importances, per-row contributions, column distributions) and the confusion
// matrix as a heat map.

import { chartWidth, extent, s, scale, tickText, ticks } from "./svg.js";

const ROW = 22;
const LABEL_CHARS = 24;

function shorten(text) {
  const value = String(text);
  return value.length > LABEL_CHARS ? `${value.slice(0, LABEL_CHARS - 1)}…` : value;
}

/**
 * Horizontal bars, one row per item ({label, value, std?, tone?}), in the order given. `signed`
 * colours negative and positive values apart and keeps zero in view (contributions); an
 * item's `tone` names its bar's class instead (drift-none… for PSI bars).
 */
export function barChart(items, { label = "", valueLabel = "", signed = false, width = chartWidth() } = {}) {
  const left = Math.min(170, Math.round(width * 0.3));
  const right = 60;
  const top = 8;
  const height = top + items.length * ROW + 34;
  // The domain holds the error bars too, so neither end runs into the labels or the margin.
  const values = items.flatMap((item) => [item.value - (item.std || 0), item.value + (item.std || 0)]);
  const domain = extent(values, { zero: true });
  const x = scale(domain, [left, width - right]);
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
  const bottom = top + items.length * ROW;
  for (const tick of ticks(domain[0], domain[1], Math.max(3, Math.round(width / 130)))) {
    svg.append(s("line", { class: "grid", x1: x(tick), x2: x(tick), y1: top, y2: bottom }));
    svg.append(s("text", { x: x(tick), y: bottom + 14, "text-anchor": "middle" }, tickText(tick)));
  }
  svg.append(s("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle", class: "label" }, valueLabel));
  items.forEach((item, index) => {
    const y = top + index * ROW;
    const value = Number.isFinite(item.value) ? item.value : 0;
    const x0 = x(Math.min(0, value));
    const colour = item.tone || (signed ? (value < 0 ? "neg" : "pos") : "s0");
    const row = s("g", { class: "bar-row" }, s("title", {}, `${item.label}: ${tickText(value)}`));
    row.append(s("text", { x: left - 8, y: y + ROW / 2 + 4, "text-anchor": "end", class: "label" }, shorten(item.label)));
    row.append(s("rect", { class: `bar-rect ${colour}`, x: x0, y: y + 3, width: Math.max(1, Math.abs(x(value) - x(0))), height: ROW - 6 }));
    if (item.std) {
      row.append(s("line", { class: "err", x1: x(value - item.std), x2: x(value + item.std), y1: y + ROW / 2, y2: y + ROW / 2 }));
    }
    // The value is written past the bar and past its error bar, never over the line.
    const end = Math.max(x(value), x(0), item.std ? x(value + item.std) : -Infinity);
    row.append(s("text", { x: end + 4, y: y + ROW / 2 + 4 }, Number(value.toPrecision(3))));
    svg.append(row);
  });
  svg.append(s("line", { class: "axis", x1: x(0), x2: x(0), y1: top, y2: bottom }));
  return svg;
}

/** A sparkline-sized bar chart of counts (a column's histogram or top categories). */
export function miniBars(counts, labels) {
  const width = 120;
  const height = 28;
  const most = Math.max(1, ...counts);
  const step = width / Math.max(1, counts.length);
  const svg = s("svg", { class: "mini", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "distribution" });
  counts.forEach((count, i) => {
    const barHeight = Math.max(count ? 1 : 0, (count / most) * (height - 2));
    svg.append(
      s("rect", { class: "bar-rect s0", x: i * step + 0.5, y: height - barHeight, width: Math.max(1, step - 1), height: barHeight },
        s("title", {}, `${labels[i]}: ${count}`)),
    );
  });
  return svg;
}

/** The confusion matrix: rows are the true classes, columns the predicted ones. */
export function confusionMatrix(classes, matrix, { width = 420 } = {}) {
  const n = classes.length;
  const left = 110;
  const top = 40;
  const cell = Math.min(64, (width - left - 10) / Math.max(1, n));
  const height = top + n * cell + 10;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${left + n * cell + 10} ${height}`, role: "img", "aria-label": "confusion matrix" });
  const most = Math.max(1, ...matrix.flat());
  svg.append(s("text", { x: left + (n * cell) / 2, y: 12, "text-anchor": "middle", class: "label" }, "predicted"));
  classes.forEach((name, j) => {
    svg.append(s("text", { x: left + j * cell + cell / 2, y: top - 8, "text-anchor": "middle" }, shorten(name).slice(0, 10)));
  });
  matrix.forEach((row, i) => {
    svg.append(s("text", { x: left - 8, y: top + i * cell + cell / 2 + 4, "text-anchor": "end" }, shorten(classes[i])));
    row.forEach((count, j) => {
      const level = count ? Math.min(5, 1 + Math.floor((count / most) * 4.999)) : 0;
      svg.append(
        s("rect", { class: `heat${level}`, x: left + j * cell, y: top + i * cell, width: cell - 2, height: cell - 2 },
          s("title", {}, `true ${classes[i]}, predicted ${classes[j]}: ${count}`)),
        s("text", { class: `cell-text${level >= 4 ? " light" : ""}`, x: left + j * cell + cell / 2 - 1, y: top + i * cell + cell / 2 }, count),
      );
    });
  });
  svg.append(s("text", { x: 12, y: top + (n * cell) / 2, "text-anchor": "middle", class: "label", transform: `rotate(-90 12 ${top + (n * cell) / 2})` }, "true"));
  return svg;
}
