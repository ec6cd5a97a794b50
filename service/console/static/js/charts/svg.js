// The chart primitives: SVG elements, linear scales, readable ticks and a plotting frame with
// axes. Charts draw into a fixed viewBox and the stylesheet scales them to the page's width;
// colours come from classes (.s0…), never style attributes, which the CSP refuses.

const NS = "http://www.w3.org/2000/svg";
// Series colours, .s0 to .s9 in console.css: ten, for a model's ten ROC curves at most.
export const PALETTE = 10;

export function s(tag, attrs = {}, ...children) {
  const element = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function scale([d0, d1], [r0, r1]) {
  const span = d1 - d0 || 1;
  return (value) => r0 + ((value - d0) / span) * (r1 - r0);
}

/** The extent of finite numbers in `values`, widened when it is a single point. */
export function extent(values, { zero = false } = {}) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const value of values) {
    if (value === null || value === undefined || !Number.isFinite(value)) continue;
    if (value < lo) lo = value;
    if (value > hi) hi = value;
  }
  if (lo === Infinity) return [0, 1];
  if (zero) {
    lo = Math.min(lo, 0);
    hi = Math.max(hi, 0);
  }
  if (lo === hi) {
    const pad = Math.abs(lo) * 0.1 || 1;
    return [lo - pad, hi + pad];
  }
  return [lo, hi];
}

/** About `count` round tick values within [lo, hi] (steps of 1, 2 or 5 × 10^k). */
export function ticks(lo, hi, count = 5) {
  const raw = (hi - lo) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  // The round step nearest the raw one (by ratio), so a narrow axis still gets a few ticks.
  const step = [1, 2, 5, 10].map((m) => m * power).reduce((best, c) => (Math.abs(Math.log(c / raw)) < Math.abs(Math.log(best / raw)) ? c : best));
  const first = Math.ceil(lo / step - 1e-9) * step;
  const values = [];
  for (let value = first; value <= hi + step * 1e-9; value += step) values.push(Number(value.toPrecision(12)));
  return values;
}

export function tickText(value) {
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude >= 1e5 || magnitude < 1e-3)) return value.toExponential(0);
  return String(Number(value.toPrecision(6)));
}

/**
 * A chart's width in SVG units: the page's width, at most 640. Drawn at about one unit per
 * pixel, a chart keeps legible text on a phone instead of shrinking a wide drawing.
 */
export function chartWidth(max = 640) {
  const available = (document.querySelector("main")?.clientWidth || max) - 48;
  return Math.round(Math.max(280, Math.min(max, available)));
}

/**
 * An empty plot with axes: returns the svg, the plot group, and the scales x() and y().
 * `x` and `y` are [lo, hi] domains.
 */
export function frame({ width = chartWidth(), height = 300, x, y, xLabel = "", yLabel = "", label, xTicks, yTicks }) {
  const margin = { top: 12, right: 16, bottom: 42, left: 58 };
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label || yLabel });
  const sx = scale(x, [margin.left, width - margin.right]);
  const sy = scale(y, [height - margin.bottom, margin.top]);
  const axes = s("g");
  for (const value of yTicks || ticks(y[0], y[1])) {
    const py = sy(value);
    axes.append(s("line", { class: "grid", x1: margin.left, x2: width - margin.right, y1: py, y2: py }));
    axes.append(s("text", { x: margin.left - 6, y: py + 4, "text-anchor": "end" }, tickText(value)));
  }
  for (const value of xTicks || ticks(x[0], x[1], Math.max(3, Math.round(width / 110)))) {
    const px = sx(value);
    axes.append(s("line", { class: "tick", x1: px, x2: px, y1: height - margin.bottom, y2: height - margin.bottom + 4 }));
    axes.append(s("text", { x: px, y: height - margin.bottom + 16, "text-anchor": "middle" }, tickText(value)));
  }
  axes.append(s("line", { class: "axis", x1: margin.left, x2: width - margin.right, y1: height - margin.bottom, y2: height - margin.bottom }));
  axes.append(s("line", { class: "axis", x1: margin.left, x2: margin.left, y1: margin.top, y2: height - margin.bottom }));
  axes.append(s("text", { x: (margin.left + width - margin.right) / 2, y: height - 6, "text-anchor": "middle", class: "label" }, xLabel));
  const middle = (margin.top + height - margin.bottom) / 2;
  axes.append(s("text", { x: 14, y: middle, "text-anchor": "middle", class: "label", transform: `rotate(-90 14 ${middle})` }, yLabel));
  const plot = s("g");
  svg.append(axes, plot);
  return { svg, plot, x: sx, y: sy, margin, width, height };
}

/** An HTML legend: a coloured key per series (`names[i]` gets class .s{i mod PALETTE}). */
export function legend(names) {
  const box = document.createElement("div");
  box.className = "legend";
  names.forEach((name, index) => {
    const item = document.createElement("span");
    const key = document.createElement("span");
    key.className = `key s${index % PALETTE}`;
    item.append(key, name);
    box.append(item);
  });
  return box;
}
