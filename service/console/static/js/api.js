// Every call the console makes goes through here, so that the key (when the server wants
// one) travels with each of them and every error reads the same way: the API's problem
// details (RFC 9457), whose `detail` is written for a person.

const KEY = "coppice.key";
const ROLE = "coppice.role";

/** Whether the server was started with API keys (the page says so; see pages.py). */
export const keysRequired = document.documentElement.dataset.keys === "required";

export class ApiError extends Error {
  constructor(status, problem) {
    const body = problem && typeof problem === "object" ? problem : {};
    super(body.detail || body.error || body.title || `The server answered ${status}.`);
    this.status = status;
    this.errors = Array.isArray(body.errors) ? body.errors : [];
  }
}

// sessionStorage: the key lives as long as this tab and is never written to disk by us.
export function currentKey() {
  return sessionStorage.getItem(KEY);
}

export function currentRole() {
  return keysRequired ? sessionStorage.getItem(ROLE) : "admin";
}

export function isAdmin() {
  return currentRole() === "admin";
}

export function signIn(key, role) {
  sessionStorage.setItem(KEY, key);
  sessionStorage.setItem(ROLE, role);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ROLE);
}

function headers(extra = {}, key = currentKey()) {
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function readBody(response) {
  const type = response.headers.get("content-type") || "";
  if (response.status === 204) return null;
  return type.includes("json") ? response.json() : response.text();
}

/** One JSON call; resolves to the parsed body, rejects with an ApiError. */
export async function api(method, path, body, { signal, key } = {}) {
  const init = { method, signal, headers: headers({}, key ?? currentKey()) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await readBody(response);
  if (!response.ok) {
    // An expired or revoked key: send the person back to the key form.
    if (response.status === 401 && keysRequired && key === undefined) {
      signOut();
      window.dispatchEvent(new Event("coppice:signed-out"));
    }
    throw new ApiError(response.status, data);
  }
  return data;
}

/** A GET whose answer is a file (a model export, a dataset's download): resolves to a Blob, rejects with an ApiError. */
export async function getFile(path, { signal } = {}) {
  const response = await fetch(path, { method: "GET", signal, headers: headers() });
  if (!response.ok) {
    if (response.status === 401 && keysRequired) {
      signOut();
      window.dispatchEvent(new Event("coppice:signed-out"));
    }
    throw new ApiError(response.status, await readBody(response));
  }
  return response.blob();
}

export const get = (path, options) => api("GET", path, undefined, options);
export const post = (path, body, options) => api("POST", path, body, options);
export const put = (path, body, options) => api("PUT", path, body, options);
export const del = (path, options) => api("DELETE", path, undefined, options);

/**
 * A multipart upload with progress: fetch() reports no upload progress, XMLHttpRequest does.
 * `onProgress` receives a fraction in [0, 1].
 */
export function upload(path, form, onProgress) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", path);
    for (const [name, value] of Object.entries(headers())) request.setRequestHeader(name, value);
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    request.addEventListener("load", () => {
      let body = null;
      try {
        body = JSON.parse(request.responseText);
      } catch {
        body = null;
      }
      if (request.status >= 200 && request.status < 300) resolve(body);
      else reject(new ApiError(request.status, body));
    });
    request.addEventListener("error", () => reject(new ApiError(0, { detail: "The upload failed: the server could not be reached." })));
    request.send(form);
  });
}

/**
 * Which role a key has, through the public API only: it must read (401 otherwise), and an
 * admin-only call that changes nothing (cancelling a job that cannot exist) tells the roles
 * apart: 403 for a predict key, 404 for an admin key.
 */
export async function roleOf(key) {
  await get("/v1/datasets?limit=1", { key });
  try {
    await post("/v1/jobs/00000000-0000-0000-0000-000000000000/cancel", undefined, { key });
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) return "predict";
    if (error instanceof ApiError && error.status === 404) return "admin";
    throw error;
  }
  return "admin";
}
