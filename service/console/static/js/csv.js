// CSV in the browser: reading a file for batch predictions and column profiles, and writing
// the predictions back out. RFC 4180: quoted cells may hold commas, quotes ("") and newlines.

/** Parse CSV text into an array of rows (arrays of strings); blank lines are skipped. */
export function parseCsv(text) {
  const rows = [];
  let row = [];
  let cell = "";
  let quoted = false;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0; // a byte-order mark is not part of the header
  const endRow = () => {
    row.push(cell);
    if (row.length > 1 || row[0] !== "") rows.push(row);
    row = [];
    cell = "";
  };
  for (; i < text.length; i += 1) {
    const char = text[i];
    if (quoted) {
      if (char === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i += 1;
        } else quoted = false;
      } else cell += char;
    } else if (char === '"') quoted = true;
    else if (char === ",") {
      row.push(cell);
      cell = "";
    } else if (char === "\n") endRow();
    else if (char !== "\r") cell += char;
  }
  if (cell !== "" || row.length) endRow();
  return rows;
}

function quote(value) {
  if (value === null || value === undefined) return "";
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export function toCsv(header, rows) {
  return [header, ...rows].map((row) => row.map(quote).join(",")).join("\r\n") + "\r\n";
}

/** A numeric cell as a number, a blank one as null (missing), anything else as its text. */
export function numericCell(text) {
  const trimmed = text.trim();
  if (trimmed === "" || /^(nan|na|null)$/i.test(trimmed)) return null;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : trimmed;
}

const BINS = 12;
const TOP = 8;

/**
 * Distributions of a parsed CSV's columns, for the dataset page: a histogram per numeric
 * column, the most frequent values per categorical one. `kinds` maps column names to the
 * kinds the server inferred.
 */
export function profile(rows, kinds) {
  const [header, ...body] = rows;
  const result = {};
  header.forEach((name, column) => {
    const cells = body.map((row) => (row[column] ?? "").trim()).filter((cell) => cell !== "");
    if (kinds[name] === "numeric") {
      const values = cells.map(Number).filter(Number.isFinite);
      if (!values.length) return;
      let lo = Infinity;
      let hi = -Infinity;
      for (const value of values) {
        lo = Math.min(lo, value);
        hi = Math.max(hi, value);
      }
      const counts = new Array(BINS).fill(0);
      const width = (hi - lo) / BINS || 1;
      for (const value of values) counts[Math.min(BINS - 1, Math.floor((value - lo) / width))] += 1;
      const edges = counts.map((_, i) => lo + i * width);
      result[name] = { histogram: { counts, edges: [...edges, hi] } };
    } else {
      const tally = new Map();
      for (const cell of cells) tally.set(cell, (tally.get(cell) || 0) + 1);
      const top = [...tally].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, TOP);
      result[name] = { top: top.map(([value, count]) => ({ value, count })) };
    }
  });
  return result;
}
