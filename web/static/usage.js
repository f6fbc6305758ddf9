// usage.js: the Usage page (docs/usage.md): allocated against used
// GPU-hours by user, by project and by week over a window, from GET /usage,
// drawn as plain SVG bar charts; users see their own usage, admins all.
import * as api from './api.js';

const NS = 'http://www.w3.org/2000/svg';
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// fmtH prints hours (or dollars) with two decimals, or two significant
// digits when smaller than 0.01 (a test run's few GPU-seconds).
const fmtH = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v === 0 || v >= 0.01 ? v.toFixed(2) : v.toPrecision(2));

// barChart draws, per row, a bar of allocated GPU-hours with the used part
// inside it, into container. Each bar is a <g data-key=KEY> holding
// rect.alloc and rect.used, with a <title> for the numbers.
export function barChart(container, rows, label) {
  const width = Math.max(container.clientWidth || 0, 320);
  const barH = 18;
  const gap = 8;
  const m = { l: 110, r: 70, t: 6, b: 6 };
  const height = m.t + m.b + Math.max(rows.length, 1) * (barH + gap);
  const w = width - m.l - m.r;
  const max = niceMax(Math.max(0, ...rows.map((r) => r.gpu_hours)));
  const svg = el('svg', { width, height, class: 'chart usage-chart', role: 'img', 'aria-label': label });
  if (rows.length === 0) {
    el('text', { x: m.l, y: m.t + barH, class: 'tick' }, svg).textContent = 'no usage in this window';
  }
  rows.forEach((r, i) => {
    const y = m.t + i * (barH + gap);
    const g = el('g', { 'data-key': r.key }, svg);
    el('title', {}, g).textContent = `${r.key}: ${fmtH(r.gpu_hours)} GPU-h allocated, ${fmtH(r.used_gpu_hours)} used (${Math.round(r.efficiency * 100)}%), $${fmtH(r.cost)}`;
    const lab = el('text', { x: m.l - 8, y: y + barH - 5, 'text-anchor': 'end', class: 'tick' }, g);
    lab.textContent = r.key.length > 16 ? r.key.slice(0, 15) + '…' : r.key || '—';
    el('rect', { x: m.l, y, width: Math.max(1, (r.gpu_hours / max) * w), height: barH, class: 'alloc', fill: '#9db7d9' }, g);
    el('rect', { x: m.l, y, width: (r.used_gpu_hours / max) * w, height: barH, class: 'used', fill: '#2f6fb5' }, g);
    el('text', { x: m.l + (r.gpu_hours / max) * w + 6, y: y + barH - 5, class: 'tick' }, g).textContent = `${fmtH(r.gpu_hours)} h`;
  });
  container.replaceChildren(svg);
}

function table(rows, by) {
  const body = rows.map((r) => `<tr data-key="${esc(r.key)}"><td>${esc(r.key)}</td><td class="num">${fmtH(r.gpu_hours)}</td><td class="num">${fmtH(r.used_gpu_hours)}</td>
    <td class="num">${Math.round(r.efficiency * 100)}%</td><td class="num">$${fmtH(r.cost)}</td><td class="num">${r.records}</td></tr>`).join('');
  return `<table class="tbl"><thead><tr><th>${esc(by)}</th><th class="num">GPU-hours</th><th class="num">used</th><th class="num">efficiency</th><th class="num">cost</th><th class="num">attempts</th></tr></thead><tbody>${body}</tbody></table>`;
}

const day = (d) => d.toISOString().slice(0, 10);

// usagePage is the page object the router shows at #/usage.
export function usagePage(params) {
  const now = new Date();
  const since = params.get('since') || day(new Date(now.getTime() - 30 * 86400e3));
  const until = params.get('until') || '';
  const root = document.createElement('div');
  root.innerHTML = `
    <div class="page-head"><h1>Usage</h1><span class="grow"></span>
      <form data-role="usage-window" class="inline">
        <label>since <input type="date" name="since" value="${esc(since)}"></label>
        <label>until <input type="date" name="until" value="${esc(until)}"></label>
        <button type="submit">Show</button>
      </form></div>
    <p class="muted">Allocated GPU-hours (light) against GPU-hours used, from the GPUs' utilization (dark). <span data-role="usage-total"></span></p>
    <p class="error" data-role="usage-error" hidden></p>
    <section class="panel"><header><h2>By user</h2></header><div class="body"><div class="usage-bars" data-chart="usage-user"></div><div data-table="usage-user"></div></div></section>
    <section class="panel"><header><h2>By project</h2></header><div class="body"><div class="usage-bars" data-chart="usage-project"></div><div data-table="usage-project"></div></div></section>
    <section class="panel"><header><h2>By week</h2></header><div class="body"><div class="usage-bars" data-chart="usage-week"></div><div data-table="usage-week"></div></div></section>`;
  let alive = true;
  const load = async (s, u) => {
    const q = new URLSearchParams();
    if (s) q.set('since', s);
    if (u) q.set('until', u);
    const err = root.querySelector('[data-role=usage-error]');
    try {
      const reps = await Promise.all(['user', 'project', 'week'].map((by) => api.get(`/usage?by=${by}&${q}`)));
      if (!alive) return;
      err.hidden = true;
      for (const rep of reps) {
        barChart(root.querySelector(`[data-chart=usage-${rep.by}]`), rep.rows, `GPU-hours by ${rep.by}`);
        root.querySelector(`[data-table=usage-${rep.by}]`).innerHTML = table(rep.rows, rep.by);
      }
      const t = reps[0].total;
      root.querySelector('[data-role=usage-total]').textContent =
        `Total: ${fmtH(t.gpu_hours)} GPU-hours allocated, ${fmtH(t.used_gpu_hours)} used (${Math.round(t.efficiency * 100)}%), $${fmtH(t.cost)}.`;
      root.dataset.loaded = String(Date.now());
    } catch (e) {
      if (!alive) return;
      err.textContent = e.message;
      err.hidden = false;
    }
  };
  root.querySelector('[data-role=usage-window]').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const q = new URLSearchParams();
    if (f.since.value) q.set('since', f.since.value);
    if (f.until.value) q.set('until', f.until.value);
    history.replaceState(null, '', '#/usage' + (q.toString() ? '?' + q : ''));
    load(f.since.value, f.until.value);
  });
  load(since, until);
  return { root, update() {}, destroy() { alive = false; } };
}
