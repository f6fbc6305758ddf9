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

// subscribe opens the server-sent event stream (GET /events). onUpdate gets
// each update's data; onState gets 'live', 'reconnecting'; onEnded gets the
// reason ('token_revoked', 'token_expired') when the server ends the stream
// because the session's token stopped working (the stream is then closed,
// not retried). EventSource sends cookies, not headers: the session cookie
// authenticates it.
export function subscribe(onUpdate, onState, onEnded) {
  const es = new EventSource('/events', { withCredentials: true });
  es.addEventListener('update', (ev) => {
    onState('live');
    onUpdate(JSON.parse(ev.data));
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
  es.onerror = () => onState('reconnecting');
  return () => es.close();
}
