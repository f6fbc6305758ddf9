// bookings.js: the Bookings page (docs/bookings.md): a calendar with a
// row per node and GPU over the coming days, each booking drawn over the
// GPUs it holds (the spreadsheet view), and a form that books through
// POST /reservations under the server's rules, showing its refusals.
import * as api from './api.js';

const DAYS = 3; // days shown, from today's midnight (local time)
const HOUR = 3600 * 1000;

const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

function h(html) {
  const t = document.createElement('template');
  t.innerHTML = html.trim();
  return t.content.firstElementChild;
}

const hhmm = (d) => d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hour12: false });
const day = (d) => d.toLocaleDateString([], { weekday: 'short', month: 'short', day: 'numeric' });
const windowText = (r) => {
  const s = new Date(r.start), e = new Date(r.end);
  return `${day(s)} ${hhmm(s)}–${s.toDateString() === e.toDateString() ? '' : day(e) + ' '}${hhmm(e)}`;
};

// pad2 writes a number with two digits.
const pad2 = (n) => String(n).padStart(2, '0');
// localInput writes d for a datetime-local input.
const localInput = (d) => `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}T${pad2(d.getHours())}:${pad2(d.getMinutes())}`;

// occurrences returns a booking's windows within [from, to): a repeating
// one (daily, weekly) by its period.
function occurrences(r, from, to) {
  const s = Date.parse(r.start), e = Date.parse(r.end);
  const flags = r.flags || [];
  const period = flags.includes('daily') ? 24 * HOUR : flags.includes('weekly') ? 7 * 24 * HOUR : 0;
  const out = [];
  for (let k = 0; ; k++) {
    const a = s + k * period, b = e + k * period;
    if (a >= to) break;
    if (b > from) out.push([a, b]);
    if (!period) break;
  }
  return out;
}

export function bookingsPage() {
  const root = h(`<section class="bookings">
    <div class="page-head"><h1>Bookings</h1><span class="grow"></span><span class="muted" data-role="range"></span></div>
    <div class="cal-wrap"><div class="cal" data-role="calendar"><p class="muted">Loading…</p></div></div>
    <h2>Book GPUs</h2>
    <form class="book-form" data-role="book">
      <label>name <input type="text" name="name" required placeholder="vision-demo"></label>
      <label>GPUs <input name="gpus" type="number" min="1" value="1" required></label>
      <label>nodes <input type="text" name="nodes" placeholder="any (or n1,n2)"></label>
      <label>GPU type <input type="text" name="gpu_type" placeholder="any (or H100)"></label>
      <label>start <input name="start" type="datetime-local" required></label>
      <label>hours <input name="hours" type="number" min="0.1" step="0.1" value="8" required></label>
      <label>users <input type="text" name="users" placeholder="you (or ana,bo)"></label>
      <label>project <input type="text" name="project"></label>
      <label>flags <input type="text" name="flags" placeholder="flex,magnetic,daily,…"></label>
      <button type="submit">Book</button>
      <p class="error" data-role="book-error" hidden></p>
      <p class="ok" data-role="book-ok" hidden></p>
    </form>
    <h2>All bookings</h2>
    <table class="list"><thead><tr><th>name</th><th>state</th><th>window</th><th>GPUs</th><th>users</th><th>project</th><th>flags</th><th>owner</th></tr></thead>
    <tbody data-role="list"></tbody></table>
  </section>`);
  const start = new Date(Date.now() + HOUR);
  start.setMinutes(0, 0, 0);
  root.querySelector('[name=start]').value = localInput(start);
  let cluster = null, bookings = null, lastLoad = 0, timer = null;

  async function load() {
    lastLoad = Date.now();
    try {
      bookings = (await api.get('/reservations')).reservations || [];
    } catch (e) {
      root.querySelector('[data-role=calendar]').replaceChildren(h(`<p class="error">${esc(e.message)}</p>`));
      return;
    }
    render();
  }

  function render() {
    if (!cluster || !bookings) return;
    const t0 = new Date();
    t0.setHours(0, 0, 0, 0);
    const from = t0.getTime(), to = from + DAYS * 24 * HOUR, span = to - from;
    const pct = (t) => (((Math.min(Math.max(t, from), to) - from) / span) * 100).toFixed(3) + '%';
    root.querySelector('[data-role=range]').textContent = `${day(new Date(from))} – ${day(new Date(to - 1))}, local time`;
    const live = bookings.filter((r) => r.state !== 'released' && r.state !== 'ended');
    // byGPU: "node/gpu" -> the windows of the bookings on it.
    const byGPU = new Map();
    for (const r of live) {
      for (const a of r.allocation || []) {
        const k = a.node_id + '/' + a.gpu_id;
        if (!byGPU.has(k)) byGPU.set(k, []);
        for (const w of occurrences(r, from, to)) byGPU.get(k).push([r, w]);
      }
    }
    let ticks = '';
    for (let d = 0; d < DAYS; d++) {
      for (let hr = 0; hr < 24; hr += 6) {
        const t = from + (d * 24 + hr) * HOUR;
        ticks += `<span class="tick${hr === 0 ? ' day' : ''}" style="left:${pct(t)}">${hr === 0 ? esc(day(new Date(t))) : pad2(hr) + ':00'}</span>`;
      }
    }
    const now = Date.now();
    let rows = `<div class="cal-row head"><div class="cal-label"></div><div class="cal-track">${ticks}</div></div>`;
    for (const n of cluster.nodes || []) {
      for (const g of n.gpus || []) {
        const k = n.node_id + '/' + g.id;
        let bars = '';
        for (const [r, [a, b]] of byGPU.get(k) || []) {
          const left = pct(a), width = ((Math.min(b, to) - Math.max(a, from)) / span) * 100;
          const title = `${r.name}: ${windowText({ start: new Date(a).toISOString(), end: new Date(b).toISOString() })} · ${(r.users || []).join(', ')}${r.project ? ' · ' + r.project : ''}`;
          bars += `<div class="bar${(r.flags || []).includes('maint') ? ' maint' : ''}" data-booking="${esc(r.name)}" style="left:${left};width:${width.toFixed(3)}%" title="${esc(title)}">${esc(r.name)}</div>`;
        }
        rows += `<div class="cal-row" data-gpu="${esc(k)}"><div class="cal-label"><span class="mono">${esc(n.node_id)}</span> GPU ${g.id}</div>
          <div class="cal-track">${bars}<span class="now" style="left:${pct(now)}"></span></div></div>`;
      }
    }
    root.querySelector('[data-role=calendar]').innerHTML = rows;
    root.querySelector('[data-role=list]').innerHTML = bookings.length
      ? bookings.map((r) => `<tr data-booking="${esc(r.name)}"><td>${esc(r.name)}</td><td><span class="badge state-${esc(r.state)}">${esc(r.state)}</span></td>
          <td>${esc(windowText(r))}</td><td class="num">${r.gpus}</td><td>${esc((r.users || []).join(', '))}</td><td>${esc(r.project || '—')}</td>
          <td>${esc((r.flags || []).join(', ') || '—')}</td><td>${esc(r.owner)}</td></tr>`).join('')
      : '<tr><td colspan="8" class="muted">No bookings.</td></tr>';
  }

  const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
  root.querySelector('[data-role=book]').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = ev.target, errEl = root.querySelector('[data-role=book-error]'), okEl = root.querySelector('[data-role=book-ok]');
    errEl.hidden = okEl.hidden = true;
    const v = (n) => f.elements[n].value.trim();
    const body = { name: v('name'), gpus: Number(v('gpus')), start: new Date(v('start')).toISOString(), duration: Math.round(Number(v('hours')) * 3600) };
    if (v('nodes')) body.nodes = list(v('nodes'));
    if (v('gpu_type')) body.gpu_type = v('gpu_type');
    if (v('users')) body.users = list(v('users'));
    if (v('project')) body.project = v('project');
    if (v('flags')) body.flags = list(v('flags'));
    try {
      const r = await api.send('POST', '/reservations', body);
      okEl.textContent = `Booked ${r.name}: ${r.gpus} GPU${r.gpus === 1 ? '' : 's'}, ${windowText(r)}.`;
      okEl.hidden = false;
      await load();
    } catch (e) {
      errEl.textContent = (e.field ? e.field + ': ' : '') + e.message;
      errEl.hidden = false;
    }
  });

  return {
    root,
    update(d) {
      cluster = d.cluster;
      clearTimeout(timer);
      // Bookings are not in the pushed update: fetched at most every 2s.
      timer = setTimeout(load, Math.max(0, 2000 - (Date.now() - lastLoad)));
      render();
    },
    destroy() {
      clearTimeout(timer);
    },
  };
}
