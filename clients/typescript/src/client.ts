// A minimal fetch client for Corral's API, typed by the generated
// openapi.d.ts (clients/generate.sh writes it from clients/openapi.json;
// do not edit that file by hand). It runs wherever fetch does: Node 18+,
// Deno, Bun, browsers.
import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];
export type Job = Schemas["Job"];
export type JobState = Schemas["Job"]["state"];
export type SubmitRequest = Schemas["SubmitRequest"];
export type SubmitAnswer = Schemas["SubmitAnswer"];
export type JobList = Schemas["JobList"];
export type JobArray = Schemas["Array"];
export type QueueResponse = Schemas["QueueResponse"];
export type QueuedJob = Schemas["QueuedJob"];
export type ClusterStatus = Schemas["ClusterStatus"];
export type ErrorBody = Schemas["ErrorBody"];
export type JobFilter = NonNullable<operations["get_jobs"]["parameters"]["query"]>;

/** The states a job ends in. */
export const TERMINAL_STATES: readonly JobState[] = ["completed", "failed", "canceled"];

/** An error answer of the API: its HTTP status and the body's code, field and message. */
export class CorralError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(field ? `${field}: ${message}` : message);
    this.name = "CorralError";
  }
}

export interface ClientOptions {
  /** The server's base URL, e.g. http://127.0.0.1:7450. */
  server: string;
  /** An API token (corral token create), sent as a bearer token. */
  token?: string;
  /** fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** CorralClient calls a Corral server: submit, get, list, cancel, wait. */
export class CorralClient {
  private readonly base: string;
  private readonly token?: string;
  private readonly fetchFn: typeof fetch;

  constructor(opts: ClientOptions) {
    this.base = opts.server.replace(/\/+$/, "");
    this.token = opts.token;
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Submits a job (or, with array, a job array: the answer is its first task with the array). */
  submit(req: SubmitRequest, opts: { idempotencyKey?: string } = {}): Promise<SubmitAnswer> {
    const headers: Record<string, string> = {};
    if (opts.idempotencyKey) headers["Idempotency-Key"] = opts.idempotencyKey;
    return this.call<SubmitAnswer>("POST", "/queue/submit", { body: req, headers });
  }

  /** One job, with its events. */
  get(id: string): Promise<Job> {
    return this.call<Job>("GET", `/jobs/${encodeURIComponent(id)}`);
  }

  /** Jobs, newest first, with filters (state, user, project, name, since, until, limit, cursor). */
  list(filter: JobFilter = {}): Promise<JobList> {
    return this.call<JobList>("GET", "/jobs", { query: filter });
  }

  /** The queue, in the order jobs will be considered. */
  queue(): Promise<QueueResponse> {
    return this.call<QueueResponse>("GET", "/queue");
  }

  /** Cancels a job (or a whole job array, given its id); grace: SIGTERM to SIGKILL, e.g. "30s". */
  cancel(id: string, grace?: string): Promise<Job | JobArray> {
    return this.call<Job | JobArray>("DELETE", `/queue/${encodeURIComponent(id)}`, { query: grace ? { grace } : {} });
  }

  /** A job's output so far (of its latest attempt unless attempt is given). */
  async logs(id: string, opts: { attempt?: number; rank?: number } = {}): Promise<string> {
    return this.call<string>("GET", `/jobs/${encodeURIComponent(id)}/logs`, { query: opts, text: true });
  }

  /** Polls a job until it ends and returns it. */
  async wait(id: string, opts: { intervalMs?: number; timeoutMs?: number } = {}): Promise<Job> {
    const interval = opts.intervalMs ?? 1000;
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    for (;;) {
      const job = await this.get(id);
      if (TERMINAL_STATES.includes(job.state)) return job;
      if (Date.now() >= deadline) throw new CorralError(0, "timeout", `job ${id} is still ${job.state}`);
      await new Promise((resolve) => setTimeout(resolve, interval));
    }
  }

  private async call<T>(
    method: string,
    path: string,
    opts: { body?: unknown; query?: Record<string, unknown>; headers?: Record<string, string>; text?: boolean } = {},
  ): Promise<T> {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { Accept: "application/json", ...opts.headers };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await this.fetchFn(url, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    });
    const text = await resp.text();
    if (!resp.ok) {
      let err: Partial<ErrorBody["error"]> = {};
      try {
        err = (JSON.parse(text) as ErrorBody).error ?? {};
      } catch {
        // not JSON: a proxy's page
      }
      throw new CorralError(resp.status, err.code ?? `http_${resp.status}`, err.message ?? text.slice(0, 200), err.field || undefined);
    }
    if (opts.text) return text as T;
    return (text ? JSON.parse(text) : undefined) as T;
  }
}
