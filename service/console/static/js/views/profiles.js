// Column distributions for the dataset page. The API's dataset body gives each column's kind,
// missing and distinct counts; when it also gives `stats` (a `histogram` or `top`
// categories), those are drawn. Until then, a CSV uploaded from this tab is profiled here, in
// the browser, from the same file, and kept for the tab's life beside the key.

import { parseCsv, profile } from "../csv.js";

// Larger files are not read twice into the page's memory just for a sparkline.
const MAX_PROFILED_BYTES = 20 * 1024 * 1024;
const PREFIX = "coppice.profile.";

export async function rememberProfile(dataset, file) {
  if (file.size > MAX_PROFILED_BYTES) return;
  try {
    const kinds = Object.fromEntries(dataset.columns.map((column) => [column.name, column.kind]));
    const summary = profile(parseCsv(await file.text()), kinds);
    sessionStorage.setItem(PREFIX + dataset.id, JSON.stringify(summary));
  } catch {
    // A profile is a nicety: a file the browser cannot read or store leaves the page without it.
  }
}

/** The column's distribution: from the API's stats if it has them, else this tab's profile. */
export function distributionOf(datasetId, column) {
  if (column.stats && (column.stats.histogram || column.stats.top)) return column.stats;
  try {
    return JSON.parse(sessionStorage.getItem(PREFIX + datasetId) || "{}")[column.name] || null;
  } catch {
    return null;
  }
}
