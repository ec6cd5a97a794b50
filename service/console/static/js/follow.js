// Following something that runs on the server (a job, a search) until it ends: read it again
// and again, show each answer, and keep going through a server restart or a network blink.
// `signal` (the page's) ends it when the person leaves, aborting the read in flight.

import { post } from "./api.js";
import { errorBox, h, replace } from "./dom.js";

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/**
 * Until `ended()` or the signal aborts: `show(await read())`, where `read` is a long poll
 * (`?wait=`, whose answer is the wait); a failed read is said in `message`, then retried
 * after 2 s.
 */
export async function follow({ read, show, ended, message, signal }) {
  while (!ended() && !signal.aborted) {
    try {
      show(await read());
      replace(message);
    } catch (error) {
      if (signal.aborted) return;
      replace(message, errorBox(error?.status ? error : "Lost contact with the server; retrying…"));
      await sleep(2000, signal);
    }
  }
}

/** A listing that reads itself again every `ms` while `busy(page)` (jobs, searches). */
export async function refreshing(list, busy, signal, ms = 2000) {
  const page = await list();
  if (busy(page)) {
    setTimeout(() => {
      if (!signal.aborted) refreshing(list, busy, signal, ms).catch(() => {});
    }, ms);
  }
  return page;
}

/** A Cancel button: POST `${path}/cancel` (after `question`, if any), then `show` the answer. */
export function cancelButton(id, path, show, message, question) {
  const button = h("button", { type: "button", class: "danger", id, onclick: async () => {
    if (question && !confirm(question)) return;
    button.disabled = true;
    try {
      show(await post(`${path}/cancel`));
    } catch (error) {
      replace(message, errorBox(error));
    }
  } }, "Cancel");
  return button;
}
