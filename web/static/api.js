// api.js: every request the dashboard makes goes through this file, so
// that authentication (the cookie session) is handled in one place:
// authHeaders() and the EventSource options below.

// authHeaders returns the headers of every call. The viewer is identified
// by the session cookie (HttpOnly: this page never sees the token), which
// the browser sends with same-origin requests; X-Corral-Request marks the
// call as the dashboard's own, which the server requires of a
// cookie-authenticated change (a cross-site page cannot set it).
function authHeaders() {
  return { 'X-Corral-Request': '1' };
}

// ApiError is a failed call: the server's {"error": {code, message, field}}.
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

async function call(method, path, body) {
  const init = { method, headers: { Accept: 'application/json', ...authHeaders() }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    data = null;
  }
  if (!resp.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(resp.status, err.code, err.message || text, err.field);
  }
  return data;
}

export const get = (path) => call('GET', path);
export const send = (method, path, body) => call(method, path, body);

// whoami is the signed-in viewer ({user, role, projects, project_admin});
// it fails with status 401 when there is no session.
export const whoami = () => call('GET', '/auth/whoami');
// whoamiWith is who a token (a sign-in link's) belongs to, asked with the
// token itself and without the session cookie; it signs nobody in.
export async function whoamiWith(token) {
  const resp = await fetch('/auth/whoami', { headers: { Accept: 'application/json', Authorization: 'Bearer ' + token }, credentials: 'omit' });
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(resp.status, err.code, err.message || `HTTP ${resp.status}`, err.field);
  }
  return data;
}
// signIn turns a token into the session cookie; signOut ends it.
export const signIn = (token) => call('POST', '/auth/session', { token });
export const signOut = () => call('DELETE', '/auth/session');

// getText reads a plain-text resource (a job's log).
export async function getText(path) {
  const resp = await fetch(path, { headers: authHeaders(), credentials: 'same-origin' });
  if (!resp.ok) throw new ApiError(resp.status, 'http', await resp.text());
  return resp.text();
}

// getRange reads bytes of a plain-text resource (a job's log) with a Range
// header, e.g. 'bytes=-65536' for its last 64 KiB. It returns the text, the
// byte it starts at and the resource's whole size (from Content-Range; a
// 200 answer is the whole of it).
export async function getRange(path, range) {
  const resp = await fetch(path, { headers: { ...authHeaders(), Range: range }, credentials: 'same-origin' });
  if (!resp.ok) throw new ApiError(resp.status, 'http', await resp.text());
  const buf = await resp.arrayBuffer();
  const text = new TextDecoder().decode(buf);
  const m = /^bytes (\d+)-\d+\/(\d+)$/.exec(resp.headers.get('Content-Range') || '');
  if (resp.status === 206 && m) return { text, start: Number(m[1]), size: Number(m[2]) };
  return { text, start: 0, size: buf.byteLength };
}

// stream reads a streaming text response (a followed log), calling onChunk
// with each piece of text until it ends or signal aborts.
export async function stream(path, onChunk, signal) {
  const resp = await fetch(path, { headers: authHeaders(), credentials: 'same-origin', signal });
  if (!resp.ok || !resp.body) throw new ApiError(resp.status, 'http', await resp.text());
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    onChunk(dec.decode(value, { stream: true }));
  }
}

// subscribe opens the server-sent event stream (GET /events). The stream's
// first event is an `update` (the whole picture); each one after it is a
// `delta` against the event before it, which applyDelta turns into the
// whole picture again. onUpdate gets that picture after each event;
// onState gets 'live', 'reconnecting'; onEnded gets the reason
// ('token_revoked', 'token_expired') when the server ends the stream
// because the session's token stopped working (the stream is then closed,
// not retried). A reconnected stream starts again with an update, which
// replaces the picture. EventSource sends cookies, not headers: the
// session cookie authenticates it.
export function subscribe(onUpdate, onState, onEnded) {
  const es = new EventSource('/events', { withCredentials: true });
  let cur = null; // the latest picture
  es.addEventListener('update', (ev) => {
    onState('live');
    cur = JSON.parse(ev.data);
    onUpdate(cur);
  });
  es.addEventListener('delta', (ev) => {
    if (!cur) return; // the server sends an update first
    onState('live');
    cur = applyDelta(cur, JSON.parse(ev.data));
    onUpdate(cur);
  });
  es.addEventListener('ended', (ev) => {
    es.close();
    let reason = '';
    try {
      reason = JSON.parse(ev.data).reason;
    } catch (e) {
      reason = '';
    }
    if (onEnded) onEnded(reason);
  });
  es.onopen = () => onState('live');
  es.onerror = () => {
    cur = null; // the stream reopens with an update
    onState('reconnecting');
  };
  return () => es.close();
}

// applyDelta returns the picture a `delta` event describes (api.DashboardDelta)
// from cur, the picture before it, as Go's DashboardUpdate.Apply does: the
// lists are new arrays, the queue rows new objects with their positions
// and their waits (waited_seconds, estimated_wait_time) as of d.at.
export function applyDelta(cur, d) {
  const c = d.cluster;
  const next = {
    at: d.at,
    status: d.status,
    cluster: {
      total_gpus: c.total_gpus, available_gpus: c.available_gpus, allocated_gpus: c.allocated_gpus,
      held_gpus: c.held_gpus, foreign_gpus: c.foreign_gpus,
      nodes: applyList(cur.cluster.nodes, c.nodes, (n) => n.node_id),
    },
    queue: { queued_jobs: [], statistics: d.queue.statistics },
    active: applyList(cur.active, d.active, (j) => j.id),
  };
  if (d.queue.arrays) next.queue.arrays = d.queue.arrays;
  if (d.queue.next_cursor) next.queue.next_cursor = d.queue.next_cursor;
  const at = Date.parse(d.at);
  const pos = d.queue.positions;
  next.queue.queued_jobs = applyList(cur.queue.queued_jobs, d.queue.queued_jobs, (r) => r.id).map((r, i) => {
    const est = r.estimated_start_time ? Math.max((Date.parse(r.estimated_start_time) - at) / 1000, 0) : null;
    return { ...r, queue_position: pos && i < pos.length ? pos[i] : r.queue_position, waited_seconds: (at - Date.parse(r.queued_at)) / 1000, estimated_wait_time: est };
  });
  return next;
}

// applyList applies one list's change (api.ListDelta: upsert, remove,
// order) to list, keyed by id(item), into a new array.
function applyList(list, d, id) {
  if (!d) return list.slice();
  const gone = new Set(d.remove || []);
  const fresh = new Map((d.upsert || []).map((x) => [id(x), x]));
  const out = [];
  const kept = new Set();
  for (const x of list) {
    const k = id(x);
    if (gone.has(k)) continue;
    if (fresh.has(k)) {
      out.push(fresh.get(k));
      kept.add(k);
    } else {
      out.push(x);
    }
  }
  for (const [k, x] of fresh) if (!kept.has(k)) out.push(x);
  if (!d.order) return out;
  const byID = new Map(out.map((x) => [id(x), x]));
  return d.order.filter((k) => byID.has(k)).map((k) => byID.get(k));
}
