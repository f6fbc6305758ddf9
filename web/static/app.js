// app.js: the dashboard's pages. The server pushes everything it shows
// (GET /events); pages render from the latest update and fetch only what
// the update does not carry (one job's details, history for graphs).
import * as api from './api.js';
import { lineChart, sparkline } from './charts.js';
import { bookingsPage } from './bookings.js';
import { usagePage } from './usage.js';

const state = { data: null, skew: 0, me: null }; // skew: server clock minus ours, ms; me: the signed-in viewer
let page = null;

// ---------- helpers ----------
const $ = (sel, root = document) => root.querySelector(sel);
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
const serverNow = () => Date.now() + state.skew;
const enc = encodeURIComponent;

function dur(sec) {
  if (sec === null || sec === undefined || isNaN(sec)) return '—';
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return sec + 's';
  const m = Math.floor(sec / 60);
  if (m < 60) return `${m}m ${String(sec % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

// fromWhere is where a job's time limit or estimate came from, as corral
// show writes it: " (#SBATCH)", " (API)", " (server default)".
function fromWhere(from) {
  if (!from) return '';
  return ` (${esc({ api: 'API', default: 'server default' }[from] || from)})`;
}

function clock(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  return today ? t : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + t;
}

const gb = (mib) => (mib === 0 ? '0' : (mib / 1024).toFixed(mib >= 10240 ? 0 : 1));
const since = (iso) => `<span class="timer" data-since="${esc(iso)}">${dur((serverNow() - Date.parse(iso)) / 1000)}</span>`;
const until = (iso) => `<span class="timer" data-until="${esc(iso)}">${untilText(iso)}</span>`;
function untilText(iso) {
  const s = (Date.parse(iso) - serverNow()) / 1000;
  return s <= 1 ? 'now' : 'in ' + dur(s);
}
// hm is a time as hours and minutes (with the date when not today).
function hm(iso) {
  const d = new Date(iso);
  const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hour12: false });
  return new Date().toDateString() === d.toDateString() ? t : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + t;
}
// startRange is an estimated start's range, "14:10 to 15:40", or '' when
// it has none (no learned run times ahead: one time).
const startRange = (x) => x.estimated_start_low && x.estimated_start_high && Date.parse(x.estimated_start_high) > Date.parse(x.estimated_start_low)
  ? `${hm(x.estimated_start_low)} to ${hm(x.estimated_start_high)}` : '';
// estStart is the queue's estimated start cell: how long until it, then
// its range (else its time) and the basis of the job's estimate.
function estStart(q) {
  if (!q.estimated_start_time) return '<span class="muted">unknown</span>';
  const r = startRange(q);
  return until(q.estimated_start_time) + `<div class="sub" data-role="est-range">${r ? esc(r) : clock(q.estimated_start_time)}</div>`
    + (q.estimate_basis ? `<div class="sub" data-role="est-basis">${esc(q.estimate_basis)}</div>` : '');
}
const stateBadge = (s) => `<span class="badge state-${esc(s)}">${esc(s)}</span>`;
const prio = (p) => `<span class="prio-${esc(p)}">${esc(p)}</span>`;
const jobLink = (id, name) => `<a href="#/jobs/${enc(id)}">${esc(name || id)}</a>`;
const jobCell = (id, name) => jobLink(id, name) + (name ? `<div class="sub mono">${esc(id)}</div>` : '');
const gpuWord = (n) => `${n} GPU${n === 1 ? '' : 's'}`;

function h(html) {
  const t = document.createElement('template');
  t.innerHTML = html.trim();
  return t.content.firstElementChild;
}

// Timers tick every second without a server round trip.
setInterval(() => {
  for (const e of document.querySelectorAll('.timer[data-since]')) e.textContent = dur((serverNow() - Date.parse(e.dataset.since)) / 1000);
  for (const e of document.querySelectorAll('.timer[data-until]')) e.textContent = untilText(e.dataset.until);
}, 1000);

// GPU state as the legend names it: free, allocated, held, foreign, idle, down.
function gpuState(node, g, jobs) {
  if (g.allocated_to && g.held) return 'held';
  if (g.allocated_to) {
    const j = jobs.get(g.allocated_to);
    return node.state === 'down' ? 'down' : j && j.idle ? 'idle' : 'allocated';
  }
  if (partsHeld(g)) return node.state === 'down' ? 'down' : 'allocated';
  if (g.foreign && g.foreign.length) return 'foreign';
  if (node.state === 'down') return 'down';
  return 'free';
}

// partsHeld reports whether any MIG slice or MPS share of the GPU is held.
const partsHeld = (g) =>
  (g.shares || []).length > 0 || (g.mig && g.mig.mode === 'enabled' && (g.mig.devices || []).some((m) => m.allocated_to));

// gpuParts lists a GPU's MIG slices (free or with their holder) and its
// MPS shares, one chip each, for its tile; '' for a GPU with neither.
function gpuParts(g, jobs) {
  const chip = (id, what) => {
    if (!id) return `<span class="part free" title="${esc(what + ': free')}">${esc(what)}</span>`;
    const j = jobs.get(id);
    const who = j ? j.user : '…' + id.slice(-6);
    return `<a class="part held" href="#/jobs/${enc(id)}" title="${esc(what + ' held by ' + (j ? j.user + ' · ' : '') + id)}">${esc(what)} · ${esc(who)}</a>`;
  };
  const out = [];
  if (g.mig && g.mig.mode === 'enabled') for (const m of g.mig.devices || []) out.push(chip(m.allocated_to, m.profile || 'MIG'));
  for (const s of g.shares || []) out.push(chip(s.job_id, `${gb(s.memory_mib)} GB` + (s.compute ? ` ${s.compute}%` : '')));
  if (g.shared && !out.length) out.push('<span class="part free" title="shared GPU: takes MPS shares">MPS: no shares</span>');
  return out.length ? `<div class="parts">${out.join('')}</div>` : '';
}

const LEGEND = ['free', 'allocated', 'idle', 'held', 'foreign', 'down'];
const legendHTML = () =>
  `<div class="key">${LEGEND.map((s) => `<span class="s-${s}" style="--c:var(--${s})">${s}</span>`).join('')}</div>`;

// nvlinkGroups splits a node's GPUs into NVLink-connected groups.
function nvlinkGroups(gpus) {
  const parent = new Map(gpus.map((g) => [g.id, g.id]));
  const find = (x) => (parent.get(x) === x ? x : find(parent.get(x)));
  let links = false;
  for (const g of gpus) {
    for (const p of g.nvlink_peers || []) {
      if (!parent.has(p)) continue;
      links = true;
      const a = find(g.id), b = find(p);
      if (a !== b) parent.set(Math.max(a, b), Math.min(a, b));
    }
  }
  if (!links) return [{ linked: false, gpus }];
  const groups = new Map();
  for (const g of gpus) {
    const r = find(g.id);
    if (!groups.has(r)) groups.set(r, []);
    groups.get(r).push(g);
  }
  return [...groups.values()].map((gs) => ({ linked: gs.length > 1, gpus: gs }));
}

// migBadge is a GPU's MIG state for its tile: a badge (MIG on, with its
// devices' count; or on at the next reset) and lines for the tile's title
// naming each MIG device. Nothing for a GPU without MIG or with it off.
function migBadge(mig) {
  if (!mig) return { html: '', title: '' };
  if (mig.mode === 'enabled') {
    const devs = mig.devices || [];
    const lines = devs.map((m) => `${m.profile || 'MIG'} ${m.uuid}`).join('\n');
    return {
      html: `<span class="mig" title="${esc('MIG on: ' + (devs.map((m) => m.profile || '?').join(', ') || 'no devices'))}">MIG ×${devs.length}</span>`,
      title: `\nMIG on, ${devs.length} device(s)` + (lines ? '\n' + lines : ''),
    };
  }
  if (mig.pending_mode === 'enabled') return { html: '<span class="mig" title="MIG goes on at the GPU\'s next reset">MIG next</span>', title: '\nMIG on at the next reset' };
  return { html: '', title: '' };
}

function gpuTile(node, g, jobs) {
  const s = gpuState(node, g, jobs);
  const util = Math.max(0, Math.min(100, g.utilization || 0));
  let holder = '<span class="muted">—</span>';
  if (g.allocated_to && g.held) holder = `held: <b>${esc(g.allocated_to)}</b>`;
  else if (g.allocated_to) {
    const j = jobs.get(g.allocated_to);
    const label = j && j.name ? esc(j.name) : `<span class="jid">…${esc(g.allocated_to.slice(-8))}</span>`;
    holder = (j ? `<span class="u">${esc(j.user)}</span> · ` : '') + `<a href="#/jobs/${enc(g.allocated_to)}" title="${esc(g.allocated_to)}">${label}</a>`;
  } else if (s === 'foreign') {
    const f = g.foreign[0];
    holder = `pid ${esc(f.pid)}${f.user ? ' <span class="u">' + esc(f.user) + '</span>' : ''}`;
  }
  const temp = g.temperature === null || g.temperature === undefined ? '' : ` · ${g.temperature}°C`;
  const mig = migBadge(g.mig);
  const title = `${g.model} ${g.uuid}` + (g.simulated || node.simulated ? ' (simulated)' : '') + mig.title;
  return `<div class="gpu s-${s}" title="${esc(title)}" data-gpu="${esc(node.node_id)}/${g.id}" data-state="${s}">
    <div class="gh"><b>GPU ${g.id}</b><span class="st">${s}</span></div>
    <div class="bar"><i style="width:${util}%"></i></div>
    <div>${util}% util${temp}</div>
    <div class="muted">${gb(g.memory_used)} / ${gb(g.memory_total)} GB${g.simulated || node.simulated ? '<span class="sim" title="simulated GPU">SIM</span>' : ''}${mig.html}${g.shared ? '<span class="mig" title="shared GPU: jobs run on it as MPS shares">MPS</span>' : ''}</div>
    <div class="holder">${holder}</div>${gpuParts(g, jobs)}
  </div>`;
}

function nodeCard(n, jobs, withSparks) {
  const groups = nvlinkGroups(n.gpus);
  const anyLinks = groups.some((g) => g.linked);
  const body = groups
    .map((grp) => {
      const ids = grp.gpus.map((g) => g.id);
      const label = grp.linked ? `NVLink · GPUs ${ids.join(', ')}` : anyLinks ? 'no NVLink peer' : 'no NVLink';
      return `<div class="nvl${!anyLinks ? ' none' : ''}">${anyLinks ? `<div class="nvl-h">${label}</div>` : ''}<div class="gpus">${grp.gpus.map((g) => gpuTile(n, g, jobs)).join('')}</div></div>`;
    })
    .join('');
  const alloc = n.gpus.filter((g) => g.allocated_to || partsHeld(g)).length;
  const labels = Object.entries(n.labels || {}).map(([k, v]) => `<span class="badge label">${esc(k)}=${esc(v)}</span>`).join(' ');
  return `<div class="node${n.state === 'down' ? ' is-down' : ''}" data-node="${esc(n.node_id)}">
    <div class="node-h">
      <a class="name" href="#/nodes/${enc(n.node_id)}">${esc(n.node_id)}</a>
      <span class="badge ${esc(n.state)}">${esc(n.state)}</span>
      ${n.simulated ? '<span class="badge sim">simulated</span>' : ''}
      <span class="meta">${esc(n.gpu_type || 'no GPUs')} · ${alloc}/${n.gpu_count} allocated${n.hostname && n.hostname !== n.node_id ? ' · ' + esc(n.hostname) : ''}</span>
      ${labels}
      ${withSparks ? `<div class="spark-wrap" hidden><span>alloc</span><div data-spark="alloc"></div><span>util</span><div data-spark="util"></div></div>` : ''}
    </div>
    <div class="node-b">${body || '<span class="muted">no GPUs</span>'}</div>
  </div>`;
}

function card(k, v, cls, sub) {
  return `<div class="card ${cls || ''}"><div class="k">${k}</div><div class="v">${v}${sub ? ` <small>${sub}</small>` : ''}</div></div>`;
}

function clusterCards(d) {
  const c = d.cluster;
  let down = 0, util = 0;
  for (const n of c.nodes) for (const g of n.gpus) {
    util += g.utilization || 0;
    if (n.state === 'down' && !g.allocated_to) down++;
  }
  const meanUtil = c.total_gpus ? Math.round(util / c.total_gpus) : 0;
  return [
    card('GPUs', c.total_gpus, '', `${c.nodes.length} node${c.nodes.length === 1 ? '' : 's'}`),
    card('Free', c.available_gpus, 'free'),
    card('Allocated', c.allocated_gpus - c.held_gpus, 'allocated'),
    card('Held', c.held_gpus, 'held'),
    card('Foreign', c.foreign_gpus, 'foreign'),
    card('Down', down, 'down'),
    card('Utilization', meanUtil + '<small>%</small>'),
    card('Running jobs', d.active.length),
    card('Queued jobs', d.queue.statistics.total_queued),
  ].join('');
}

// ---------- graphs ----------
const WINDOWS = { '15m': 900, '1h': 3600, '6h': 6 * 3600, '24h': 24 * 3600 };

function windowPicker(current) {
  return `<div class="seg" data-role="window">${Object.keys(WINDOWS)
    .map((w) => `<button type="button" data-w="${w}" class="${w === current ? 'on' : ''}">${w}</button>`)
    .join('')}</div>`;
}

// livePoint is the latest update as a history point, so that graphs reach
// the present between samples. Counts over a step (starts, waits) are
// unknown for it: it is marked live and those series skip it.
function livePoint(d) {
  const c = d.cluster;
  let util = 0, mem = 0, memTotal = 0, down = 0;
  const nodes = c.nodes.map((n) => {
    let u = 0, m = 0, a = 0;
    for (const g of n.gpus) {
      u += g.utilization || 0;
      m += g.memory_used || 0;
      memTotal += g.memory_total || 0;
      if (g.allocated_to || partsHeld(g)) a++;
    }
    util += u;
    mem += m;
    if (n.state === 'down') down += n.gpus.length;
    return { node_id: n.node_id, gpus: n.gpus.length, allocated_gpus: a, utilization: n.gpus.length ? u / n.gpus.length : 0, memory_used_mib: m };
  });
  return {
    live: true, at: d.at, total_gpus: c.total_gpus, allocated_gpus: c.allocated_gpus, held_gpus: c.held_gpus, foreign_gpus: c.foreign_gpus,
    down_gpus: down, utilization: c.total_gpus ? util / c.total_gpus : 0, memory_used_mib: mem, memory_total_mib: memTotal,
    queued: d.queue.statistics.total_queued, running: d.active.length, nodes,
  };
}

// historyGraphs keeps a set of charts fed from GET /history (on start,
// when the window changes, every 15 s: the sampling interval) and from the
// live updates in between. It returns {live(), stop()}.
function historyGraphs(root, draw, nodeParam) {
  let win = '1h';
  let last = null;
  let alive = true;
  let drawn = 0;
  const render = () => {
    if (!last || !alive) return;
    drawn = Date.now();
    const hist = { ...last, points: last.points.slice() };
    if (state.data && Date.parse(state.data.at) > Date.parse(last.until)) {
      hist.points.push(livePoint(state.data));
      hist.until = state.data.at;
    }
    draw(hist);
  };
  async function load() {
    try {
      const q = `/history?since=${WINDOWS[win]}s&points=360${nodeParam ? '&node=' + enc(nodeParam) : ''}`;
      last = await api.get(q);
      render();
    } catch (e) {
      console.warn('history', e);
    }
  }
  root.addEventListener('click', (ev) => {
    const b = ev.target.closest('[data-role=window] button');
    if (!b) return;
    win = b.dataset.w;
    for (const x of root.querySelectorAll('[data-role=window] button')) x.classList.toggle('on', x.dataset.w === win);
    load();
  });
  window.addEventListener('resize', render);
  load();
  const timer = setInterval(load, 15000);
  return {
    live() {
      if (Date.now() - drawn > 2000) render();
    },
    stop() {
      alive = false;
      clearInterval(timer);
      window.removeEventListener('resize', render);
    },
  };
}

const pts = (hist, f) => hist.points.map((p) => [Date.parse(p.at), f(p)]);
// counted skips the live point: its counts over a step are unknown.
const counted = (hist) => ({ ...hist, points: hist.points.filter((p) => !p.live) });
const chartBase = (hist) => ({ since: Date.parse(hist.since), until: Date.parse(hist.until), step: hist.step * 1000 });

function drawClusterCharts(root, hist) {
  lineChart($('[data-chart=alloc]', root), {
    ...chartBase(hist), label: 'GPU allocation', fmt: (v) => +v.toFixed(1) + '',
    yMax: Math.max(1, ...hist.points.map((p) => p.total_gpus)),
    series: [
      { name: 'allocated', color: '#2563eb', area: true, points: pts(hist, (p) => p.allocated_gpus - p.held_gpus) },
      { name: 'held', color: '#7c3aed', points: pts(hist, (p) => p.held_gpus) },
      { name: 'foreign', color: '#ea580c', points: pts(hist, (p) => p.foreign_gpus) },
      { name: 'total', color: '#94a3b8', points: pts(hist, (p) => p.total_gpus) },
    ],
  });
  lineChart($('[data-chart=util]', root), {
    ...chartBase(hist), label: 'GPU utilization', unit: '%', yMax: 100,
    series: [
      { name: 'utilization', color: '#0f766e', area: true, points: pts(hist, (p) => p.utilization) },
      { name: 'memory used', color: '#a855f7', points: pts(hist, (p) => (p.memory_total_mib ? (100 * p.memory_used_mib) / p.memory_total_mib : 0)) },
    ],
  });
}

function drawQueueCharts(root, hist) {
  lineChart($('[data-chart=queue]', root), {
    ...chartBase(hist), label: 'queue length', fmt: (v) => +v.toFixed(1) + '', integer: true,
    series: [
      { name: 'queued', color: '#0284c7', area: true, points: pts(hist, (p) => p.queued) },
      { name: 'running', color: '#2563eb', points: pts(hist, (p) => p.running) },
    ],
  });
  lineChart($('[data-chart=wait]', root), {
    ...chartBase(hist), label: 'wait times', fmt: (v) => dur(v), minMax: 60,
    series: [
      { name: 'mean wait', color: '#d97706', area: true, points: counted(hist).points.filter((p) => p.wait_mean !== null).map((p) => [Date.parse(p.at), p.wait_mean]) },
      { name: 'longest wait', color: '#dc2626', points: counted(hist).points.filter((p) => p.wait_max !== null).map((p) => [Date.parse(p.at), p.wait_max]) },
    ],
  });
  lineChart($('[data-chart=rate]', root), {
    ...chartBase(hist), label: 'jobs per hour', fmt: (v) => (v >= 100 ? v.toFixed(0) : +v.toFixed(1)) + '/h', minMax: 10,
    series: [
      { name: 'started / h', color: '#16a34a', area: true, points: pts(counted(hist), (p) => p.starts_per_hour) },
      { name: 'completed / h', color: '#0f766e', points: pts(counted(hist), (p) => (p.completed * 3600) / hist.step) },
      { name: 'failed / h', color: '#dc2626', points: pts(counted(hist), (p) => (p.failed * 3600) / hist.step) },
    ],
  });
}

// ---------- pages ----------
// A page is {root, update(data), destroy()}; update runs on every event.

function clusterPage() {
  const root = h(`<div>
    <div class="page-head"><h1>Cluster</h1><span class="grow"></span>${legendHTML()}</div>
    <div class="cards" data-role="cards"></div>
    <section class="panel"><header><h2>Cluster over time</h2><div class="right">${windowPicker('1h')}</div></header>
      <div class="body charts">
        <div><h3>GPU allocation</h3><div class="chart-box" data-chart="alloc"></div></div>
        <div><h3>GPU utilization and memory</h3><div class="chart-box" data-chart="util"></div></div>
      </div></section>
    <div class="page-head"><h2>Nodes</h2></div>
    <div class="nodes" data-role="nodes"></div>
  </div>`);
  let nodeHist = null;
  const graphs = historyGraphs(root, (hist) => drawClusterCharts(root, hist));
  async function loadSparks() {
    try {
      nodeHist = await api.get('/history?since=3600s&points=60&node=all');
      drawSparks();
    } catch (e) {
      console.warn('node history', e);
    }
  }
  function drawSparks() {
    if (!nodeHist) return;
    const series = new Map();
    for (const p of nodeHist.points) for (const n of p.nodes || []) {
      if (!series.has(n.node_id)) series.set(n.node_id, { alloc: [], util: [], gpus: 1 });
      const s = series.get(n.node_id);
      s.alloc.push([Date.parse(p.at), n.allocated_gpus]);
      s.util.push([Date.parse(p.at), n.utilization]);
      s.gpus = Math.max(s.gpus, n.gpus);
    }
    for (const el of root.querySelectorAll('.node')) {
      const s = series.get(el.dataset.node);
      if (!s || s.alloc.length < 2) continue;
      $('.spark-wrap', el).hidden = false;
      sparkline($('[data-spark=alloc]', el), s.alloc, { color: '#2563eb', yMax: s.gpus });
      sparkline($('[data-spark=util]', el), s.util, { color: '#0f766e', yMax: 100 });
    }
  }
  loadSparks();
  const sparkTimer = setInterval(loadSparks, 15000);
  return {
    root,
    update(d) {
      const jobs = new Map(d.active.map((j) => [j.id, j]));
      $('[data-role=cards]', root).innerHTML = clusterCards(d);
      const nodes = $('[data-role=nodes]', root);
      nodes.innerHTML = d.cluster.nodes.length
        ? d.cluster.nodes.map((n) => nodeCard(n, jobs, true)).join('')
        : '<p class="muted">No nodes yet. Start one with <code>corral up</code> or <code>corral agent --server URL</code>.</p>';
      drawSparks();
      graphs.live();
    },
    destroy() {
      graphs.stop();
      clearInterval(sparkTimer);
    },
  };
}

function nodePage(id) {
  const root = h(`<div>
    <div class="page-head"><h1>Node ${esc(id)}</h1><span class="grow"></span>${legendHTML()}</div>
    <div data-role="node"></div>
    <section class="panel"><header><h2>This node over time</h2><div class="right">${windowPicker('1h')}</div></header>
      <div class="body charts">
        <div><h3>GPUs allocated</h3><div class="chart-box" data-chart="nalloc"></div></div>
        <div><h3>Utilization and memory</h3><div class="chart-box" data-chart="nutil"></div></div>
      </div></section>
  </div>`);
  const graphs = historyGraphs(root, (hist) => {
    const mine = hist.points.map((p) => [Date.parse(p.at), (p.nodes || []).find((n) => n.node_id === id)]).filter((x) => x[1]);
    let memTotal = 0;
    const cur = state.data && state.data.cluster.nodes.find((n) => n.node_id === id);
    if (cur) memTotal = cur.gpus.reduce((a, g) => a + g.memory_total, 0);
    lineChart($('[data-chart=nalloc]', root), {
      ...chartBase(hist), label: 'node allocation', yMax: Math.max(1, ...mine.map((x) => x[1].gpus)), fmt: (v) => +v.toFixed(1) + '',
      series: [{ name: 'allocated', color: '#2563eb', area: true, points: mine.map(([t, n]) => [t, n.allocated_gpus]) }],
    });
    lineChart($('[data-chart=nutil]', root), {
      ...chartBase(hist), label: 'node utilization', unit: '%', yMax: 100,
      series: [
        { name: 'utilization', color: '#0f766e', area: true, points: mine.map(([t, n]) => [t, n.utilization]) },
        { name: 'memory used', color: '#a855f7', points: mine.map(([t, n]) => [t, memTotal ? (100 * n.memory_used_mib) / memTotal : 0]) },
      ],
    });
  }, id);
  return {
    root,
    update(d) {
      const n = d.cluster.nodes.find((x) => x.node_id === id);
      const jobs = new Map(d.active.map((j) => [j.id, j]));
      $('[data-role=node]', root).innerHTML = n ? nodeCard(n, jobs, false) : `<div class="notice">No node ${esc(id)}.</div>`;
      graphs.live();
    },
    destroy: () => graphs.stop(),
  };
}

// specNow is an array's expression with its current throttle.
function specNow(a) {
  const body = (a.array || '').split('%')[0];
  return a.throttle > 0 ? `${body}%${a.throttle}` : body;
}

// arrayCounts is an array's counts as a sentence.
function arrayCounts(c) {
  const active = (c.scheduled || 0) + (c.allocating || 0) + (c.running || 0);
  return `${c.queued || 0} queued, ${active} running, ${c.completed || 0} completed, ${c.failed || 0} failed` +
    (c.canceled ? `, ${c.canceled} canceled` : '');
}

// jobsArrayRow is a job array's row in the jobs list, where its newest
// task is; clicking it lists or hides its tasks.
function jobsArrayRow(a, j, isOpen) {
  return `<tr data-array="${esc(a.id)}" class="array-row" style="cursor:pointer" title="${isOpen ? 'hide' : 'list'} its tasks">
    <td>${isOpen ? '▾' : '▸'} array <span class="mono">${esc(a.id)}</span>${a.name ? `<div class="sub">${esc(a.name)}</div>` : ''}<div class="sub mono">[${esc(specNow(a))}]</div></td>
    <td>${stateBadge(a.state || j.state)}</td><td>${esc(j.user)}<div class="sub">${esc(j.project)}</div></td><td>${prio(j.priority)}</td>
    <td class="num">${j.gpu_count * (j.nodes || 1)}<div class="sub">per task</div></td><td>${clock(j.submitted_at)}</td>
    <td colspan="2" class="why" data-role="array-counts">${esc(arrayCounts(a.counts || {}))}</td></tr>`;
}

// arrayRow is a job array's row in the queue: its first waiting task's
// place, and its tasks' counts; clicking it lists or hides its tasks.
function arrayRow(a, q, isOpen) {
  const counts = arrayCounts(a.counts || {});
  return `<tr data-array="${esc(a.id)}" class="array-row" style="cursor:pointer" title="${isOpen ? 'hide' : 'list'} its tasks">
    <td class="num">${q.queue_position || '—'}</td>
    <td>${isOpen ? '▾' : '▸'} array <span class="mono">${esc(a.id)}</span>${a.name ? `<div class="sub">${esc(a.name)}</div>` : ''}<div class="sub mono">[${esc(specNow(a))}]</div></td>
    <td>${esc(q.user)}<div class="sub">${esc(q.project)}</div></td>
    <td>${prio(q.priority)}</td>
    <td class="num">${q.requested_gpus}<div class="sub">per task</div></td>
    <td>${since(q.queued_at)}</td>
    <td>${q.estimated_start_time ? until(q.estimated_start_time) : '<span class="muted">—</span>'}</td>
    <td class="why" data-role="array-counts">${esc(counts)}</td></tr>`;
}

function options(values, current, all) {
  return `<option value="">${all}</option>` + [...values].sort().map((v) => `<option${v === current ? ' selected' : ''}>${esc(v)}</option>`).join('');
}

function queuePage(params) {
  const f = { user: params.get('user') || '', project: params.get('project') || '' };
  const root = h(`<div>
    <div class="page-head"><h1>Queue</h1><span class="grow"></span>
      <div class="filters"><label>User <select data-f="user"></select></label><label>Project <select data-f="project"></select></label></div></div>
    <div class="cards" data-role="cards"></div>
    <section class="panel"><header><h2 data-role="qtitle">Waiting</h2><span class="muted">in the order the scheduler considers them</span></header>
      <div class="body flush"><table><thead><tr><th class="num">#</th><th>Job</th><th>User / project</th><th>Priority</th><th class="num">GPUs</th><th>Waiting</th><th>Estimated start</th><th>Why pending</th></tr></thead>
      <tbody data-role="queued"></tbody></table></div></section>
    <section class="panel"><header><h2 data-role="rtitle">Running</h2></header>
      <div class="body flush"><table><thead><tr><th>Job</th><th>State</th><th>User / project</th><th>Priority</th><th class="num">GPUs</th><th>Where</th><th>Elapsed</th><th>Estimate</th></tr></thead>
      <tbody data-role="running"></tbody></table></div></section>
    <section class="panel"><header><h2>Queue over time</h2><div class="right">${windowPicker('1h')}</div></header>
      <div class="body charts">
        <div><h3>Queue length</h3><div class="chart-box" data-chart="queue"></div></div>
        <div><h3>Wait before start</h3><div class="chart-box" data-chart="wait"></div></div>
        <div><h3>Jobs per hour</h3><div class="chart-box" data-chart="rate"></div></div>
      </div></section>
  </div>`);
  root.addEventListener('change', (ev) => {
    const k = ev.target.dataset.f;
    if (!k) return;
    f[k] = ev.target.value;
    const q = new URLSearchParams(Object.entries(f).filter(([, v]) => v)).toString();
    history.replaceState(null, '', '#/queue' + (q ? '?' + q : ''));
    if (state.data) this_.update(state.data);
  });
  const graphs = historyGraphs(root, (hist) => drawQueueCharts(root, hist));
  const match = (j) => (!f.user || j.user === f.user) && (!f.project || j.project === f.project);
  // Job arrays are one row each; a click on it lists its tasks (docs/arrays.md).
  const open = new Set();
  root.addEventListener('click', (ev) => {
    const row = ev.target.closest('[data-array]');
    if (!row) return;
    const id = row.dataset.array;
    if (open.has(id)) open.delete(id); else open.add(id);
    if (state.data) this_.update(state.data);
  });
  const this_ = {
    root,
    update(d) {
      const users = new Set([...d.queue.queued_jobs, ...d.active].map((j) => j.user));
      const projects = new Set([...d.queue.queued_jobs, ...d.active].map((j) => j.project));
      if (f.user) users.add(f.user);
      if (f.project) projects.add(f.project);
      $('[data-f=user]', root).innerHTML = options(users, f.user, 'all users');
      $('[data-f=project]', root).innerHTML = options(projects, f.project, 'all projects');
      const s = d.queue.statistics;
      $('[data-role=cards]', root).innerHTML = [
        card('Queued', s.total_queued),
        card('Running', s.total_running),
        card('Average wait', dur(s.average_wait_time)),
        card('Wait p50', dur(s.wait_time_p50)),
        card('Wait p95', dur(s.wait_time_p95)),
        card('Wait p99', dur(s.wait_time_p99)),
        card('Started', s.queue_throughput, '', 'last hour'),
        card('Completed', s.completed_last_hour, '', 'last hour'),
      ].join('');
      const queued = d.queue.queued_jobs.filter(match);
      // Updates carry the head of the queue (500 jobs); the statistics count them all.
      const filtered = f.user || f.project;
      $('[data-role=qtitle]', root).textContent = d.queue.next_cursor && !filtered
        ? `Waiting (${s.total_queued}, the first ${d.queue.queued_jobs.length} shown)` : `Waiting (${queued.length})`;
      const arrays = new Map((d.queue.arrays || []).map((a) => [a.id, a]));
      const seen = new Set();
      const rows = [];
      const shown = new Map(); // tasks listed per open array
      for (const q of queued) {
        const id = q.array_job_id;
        if (id && !seen.has(id)) {
          seen.add(id);
          rows.push({ array: arrays.get(id) || { id, counts: {} }, q });
        }
        if (!id || open.has(id)) rows.push({ q });
        if (id) shown.set(id, (shown.get(id) || 0) + 1);
      }
      // Updates carry an array's first 100 waiting tasks: say how many more.
      for (const [id, n] of shown) {
        const a = arrays.get(id);
        if (!open.has(id) || !a || (a.counts.queued || 0) <= n) continue;
        const last = rows.map((r) => r.q && r.q.array_job_id === id).lastIndexOf(true);
        rows.splice(last + 1, 0, { more: `… and ${a.counts.queued - n} more waiting tasks: corral queue ${id}` });
      }
      if (d.queue.next_cursor) rows.push({ more: `… the queue goes on past its first ${d.queue.queued_jobs.length} jobs: corral queue --all` });
      $('[data-role=queued]', root).innerHTML = rows.length
        ? rows.map(({ array, q, more }) => more ? `<tr><td></td><td colspan="7" class="muted">${esc(more)}</td></tr>` : array ? arrayRow(array, q, open.has(array.id)) : `<tr data-job="${esc(q.id)}">
            <td class="num">${q.queue_position || '—'}</td>
            <td>${jobCell(q.id, q.name)}</td>
            <td>${esc(q.user)}<div class="sub">${esc(q.project)}</div></td>
            <td>${prio(q.priority)}</td>
            <td class="num">${q.requested_gpus}${q.nodes > 1 ? `<div class="sub">${q.nodes} nodes</div>` : ''}</td>
            <td>${since(q.queued_at)}</td>
            <td>${estStart(q)}</td>
            <td class="why">${esc(q.pending_message || q.pending_cause || q.pending_reason || '')}</td></tr>`).join('')
        : '<tr class="empty-row"><td colspan="8">Nothing is waiting.</td></tr>';
      const running = d.active.filter(match);
      $('[data-role=rtitle]', root).textContent = `Running (${running.length})`;
      $('[data-role=running]', root).innerHTML = running.length
        ? running.map((j) => {
            const nodes = [...new Set(j.allocation.map((a) => a.node_id))];
            const where = nodes.map((n) => `${esc(n)}: ${j.allocation.filter((a) => a.node_id === n).map((a) => a.gpu_id).join(',')}`).join('<br>');
            let est = '<span class="muted">—</span>';
            if (j.estimated_duration && j.started_at) {
              const done = (serverNow() - Date.parse(j.started_at)) / 1000 / j.estimated_duration;
              est = `~${dur(j.estimated_duration)}<div class="progress${done > 1 ? ' over' : ''}"><i style="width:${Math.min(100, done * 100).toFixed(0)}%"></i></div>`;
            }
            return `<tr data-job="${esc(j.id)}">
              <td>${jobCell(j.id, j.name)}</td>
              <td>${stateBadge(j.state)}${j.idle ? ' <span class="badge" style="background:#fef3c7;color:#92400e">idle</span>' : ''}${j.preempting ? ' <span class="badge">preempting</span>' : ''}</td>
              <td>${esc(j.user)}<div class="sub">${esc(j.project)}</div></td>
              <td>${prio(j.priority)}</td>
              <td class="num">${j.allocation.length}</td>
              <td class="mono">${where}</td>
              <td>${j.started_at ? since(j.started_at) : '<span class="muted">starting</span>'}</td>
              <td>${est}</td></tr>`;
          }).join('')
        : '<tr class="empty-row"><td colspan="8">No job is running.</td></tr>';
      graphs.live();
    },
    destroy: () => graphs.stop(),
  };
  return this_;
}

function jobsPage(params) {
  const f = { state: params.get('state') || '', user: params.get('user') || '', project: params.get('project') || '' };
  const root = h(`<div>
    <div class="page-head"><h1>Jobs</h1><span class="grow"></span>
      <div class="filters">
        <label>State <select data-f="state">${['', 'queued', 'scheduled', 'allocating', 'running', 'completed', 'failed', 'canceled']
          .map((s) => `<option value="${s}"${s === f.state ? ' selected' : ''}>${s || 'any'}</option>`).join('')}</select></label>
        <label>User <input type="text" data-f="user" size="10" value="${esc(f.user)}"></label>
        <label>Project <input type="text" data-f="project" size="10" value="${esc(f.project)}"></label>
      </div></div>
    <div data-role="err"></div>
    <section class="panel"><div class="body flush"><table><thead><tr><th>Job</th><th>State</th><th>User / project</th><th>Priority</th><th class="num">GPUs</th><th>Submitted</th><th>Ran for</th><th>Exit</th></tr></thead>
      <tbody data-role="rows"><tr class="empty-row"><td colspan="8">Loading…</td></tr></tbody></table></div></section>
  </div>`);
  let pending = null;
  let lastLoad = 0;
  // Job arrays are one row each; a click on it lists its tasks (docs/arrays.md).
  const open = new Set();
  root.addEventListener('click', (ev) => {
    const row = ev.target.closest('[data-array]');
    if (!row) return;
    const id = row.dataset.array;
    if (open.has(id)) open.delete(id); else open.add(id);
    load();
  });
  async function load() {
    lastLoad = Date.now();
    const q = new URLSearchParams(Object.entries(f).filter(([, v]) => v));
    history.replaceState(null, '', '#/jobs' + (q.toString() ? '?' + q : ''));
    q.set('limit', '200');
    try {
      const { jobs: all, arrays: list } = await api.get('/jobs?' + q);
      const arrays = new Map((list || []).map((a) => [a.id, a]));
      const seen = new Set();
      const jobs = [];
      for (const j of all) {
        const id = j.array_job_id;
        if (id && !seen.has(id)) {
          seen.add(id);
          jobs.push({ array: arrays.get(id) || { id, counts: {} }, j });
        }
        if (!id || open.has(id)) jobs.push(j);
      }
      $('[data-role=err]', root).innerHTML = '';
      $('[data-role=rows]', root).innerHTML = jobs.length
        ? jobs.map((j) => {
            if (j.array) return jobsArrayRow(j.array, j.j, open.has(j.array.id));
            const ran = j.started_at ? ((j.finished_at ? Date.parse(j.finished_at) : serverNow()) - Date.parse(j.started_at)) / 1000 : null;
            return `<tr data-job="${esc(j.id)}"><td>${jobCell(j.id, j.name)}</td>
              <td>${stateBadge(j.state)}</td><td>${esc(j.user)}<div class="sub">${esc(j.project)}</div></td><td>${prio(j.priority)}</td>
              <td class="num">${j.gpu_count * (j.nodes || 1)}</td><td>${clock(j.submitted_at)}</td>
              <td>${j.started_at && !j.finished_at ? since(j.started_at) : dur(ran)}</td>
              <td>${j.exit_code === undefined || j.exit_code === null ? '' : esc(j.exit_code)}</td></tr>`;
          }).join('')
        : '<tr class="empty-row"><td colspan="8">No job matches.</td></tr>';
    } catch (e) {
      $('[data-role=err]', root).innerHTML = `<div class="notice">${esc(e.message)}</div>`;
    }
  }
  root.addEventListener('input', (ev) => {
    const k = ev.target.dataset.f;
    if (!k) return;
    f[k] = ev.target.value.trim();
    clearTimeout(pending);
    pending = setTimeout(load, 250);
  });
  load();
  return {
    root,
    update() {
      // Jobs change state with every event; reload at most every 2 s.
      if (Date.now() - lastLoad > 2000) load();
      else if (!pending) pending = setTimeout(() => { pending = null; load(); }, 2000);
    },
    destroy() {
      clearTimeout(pending);
    },
  };
}

const PRIORITIES = ['low', 'normal', 'high', 'critical'];
// A job's log is fetched LOG_PAGE bytes at a time from its end (a byte
// range; "Load earlier" fetches the page before); at most LOG_KEEP
// characters of a followed log are kept.
const LOG_PAGE = 65536;
const LOG_KEEP = 4 * 1024 * 1024;

function jobPage(id) {
  const root = h(`<div>
    <div class="page-head"><h1 data-role="title">${esc(id)}</h1><span data-role="state"></span><span class="grow"></span>
      <div class="filters" data-role="actions" hidden>
        <label>Priority <select data-role="prio">${PRIORITIES.map((p) => `<option>${p}</option>`).join('')}</select></label>
        <button type="button" class="btn" data-act="prio">Set priority</button>
        <button type="button" class="btn danger" data-act="cancel">Cancel job</button>
      </div></div>
    <div data-role="msg"></div>
    <div class="grid2">
      <div>
        <section class="panel"><header><h2>Details</h2></header><div class="body"><dl class="fields" data-role="fields"></dl></div></section>
        <section class="panel" data-role="whatif" hidden><header><h2>With fewer GPUs?</h2></header><div class="body">
          <div class="filters"><label>GPUs per node <select data-role="whatif-gpus"></select></label>
          <button type="button" class="btn" data-act="whatif">When would it start?</button></div>
          <div class="sub" data-role="whatif-answer"></div></div></section>
      </div>
      <div>
        <section class="panel"><header><h2>Events</h2></header><div class="body"><ol class="timeline" data-role="events"></ol></div></section>
        <section class="panel"><header><h2>Allocation</h2></header><div class="body flush"><table><thead><tr><th>Node</th><th class="num">GPU</th><th>UUID</th><th class="num">Memory</th></tr></thead><tbody data-role="alloc"></tbody></table></div></section>
      </div>
    </div>
    <section class="panel"><header><h2 data-role="logtitle">Output</h2><select data-role="rank" hidden title="which node of the gang"></select><button data-role="earlier" hidden title="fetch the 64 KiB before what is shown">Load earlier</button><span class="right muted" data-role="logstate"></span></header><pre class="log" data-role="log"></pre></section>
  </div>`);
  let job = null;
  let logKey = '';
  let rank = 0; // the gang rank whose output is shown
  let logAbort = null;
  let logSeq = 0; // the latest followLog: an older one's answers are dropped
  let logStart = 0; // the first byte of the log shown
  let logPath = '';
  let lastLoad = 0;
  let timer = null;
  const msg = (text, ok) => ($('[data-role=msg]', root).innerHTML = text ? `<div class="notice${ok ? ' ok' : ''}">${esc(text)}</div>` : '');

  function render(j) {
    job = j;
    $('[data-role=title]', root).textContent = j.name || j.id;
    $('[data-role=state]', root).innerHTML = stateBadge(j.state) + (j.cancel_requested && !['canceled', 'completed', 'failed'].includes(j.state) ? ' <span class="badge">cancel requested</span>' : '');
    const terminal = ['completed', 'failed', 'canceled'].includes(j.state);
    // The server decides who may act; the page hides what the role lacks.
    $('[data-role=actions]', root).hidden = terminal || !canActOn(j);
    const sel = $('[data-role=prio]', root);
    if (document.activeElement !== sel) sel.value = j.priority;
    const rows = [
      ['ID', `<span class="mono">${esc(j.id)}</span>`],
      ['Name', esc(j.name || '—')],
      ['User / project', `${esc(j.user)} / ${esc(j.project)}`],
      ['Command', `<code>${esc(j.command)}</code>`],
      j.workdir ? ['Workdir', `<code>${esc(j.workdir)}</code>`] : null,
      ['GPUs', `${gpuWord(j.gpu_count)}${j.nodes > 1 ? ` × ${j.nodes} nodes` : ''}${j.gpu_type ? ' · ' + esc(j.gpu_type) : ''}${j.gpu_memory_gb ? ` · ≥ ${j.gpu_memory_gb} GB each` : ''}`],
      j.pool ? ['Pool', `<span data-role="pool">${esc(j.pool)}</span>`] : null,
      ['Priority', prio(j.priority)],
      // depends_on, e.g. "afterok:ID:ID,singleton": each job id a link.
      j.depends_on ? ['Depends on', `<span class="mono">${j.depends_on.split(/([,?:])/).map((p, i, a) => a[i - 1] === ':' ? jobLink(p) : esc(p)).join('')}</span>`] : null,
      // The time limit and the estimate, each with where it came from
      // (time_limit_from, estimate_from: flag, #CORRAL, #SBATCH, api, default).
      ['Time limit', `<span data-role="time-limit">${j.time_limit ? dur(j.time_limit) + fromWhere(j.time_limit_from) : 'none'}</span>`],
      ['Estimate', `<span data-role="estimate">${j.estimated_duration ? dur(j.estimated_duration) + fromWhere(j.estimate_from) : 'none given'}</span>`],
      ['Submitted', clock(j.submitted_at)],
      j.state === 'queued' ? ['Queue position', j.queue_position || '—'] : null,
      j.state === 'queued' ? ['Estimated start', j.estimated_start_time ? `${until(j.estimated_start_time)} (<span data-role="est-range">${esc(startRange(j) || clock(j.estimated_start_time))}</span>)` : 'unknown'] : null,
      j.estimate_basis ? ['Estimate basis', `<span data-role="est-basis">${esc(j.estimate_basis)}</span>`] : null,
      j.state === 'queued' && (j.pending_message || j.pending_cause || j.pending_reason) ? ['Why pending', `<span class="why">${esc(j.pending_message || j.pending_cause || j.pending_reason)}</span>`] : null,
      ['Started', j.started_at ? clock(j.started_at) + (terminal ? '' : ` (${since(j.started_at)} ago)`) : '—'],
      ['Finished', j.finished_at ? clock(j.finished_at) : '—'],
      j.exit_code !== undefined && j.exit_code !== null ? ['Exit code', esc(j.exit_code)] : null,
      ['Retries', `${j.retry_count} of ${j.max_retries}`],
      j.message ? ['Last message', esc(j.message)] : null,
      j.idle ? ['Idle', `its GPUs are idle since ${clock(j.idle_since)}`] : null,
      j.preempt_message ? ['Preemption', esc(j.preempt_message)] : null,
      j.notebook ? ['Notebook', notebookCell(j)] : null,
    ].filter(Boolean);
    $('[data-role=fields]', root).innerHTML = rows.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('');
    // What-if (GET /jobs/{id}/what-if?gpus=N): when a queued job would
    // start with fewer GPUs per node, nothing submitted.
    const wi = $('[data-role=whatif]', root);
    wi.hidden = !(j.state === 'queued' && j.gpu_count > 1);
    const wsel = $('[data-role=whatif-gpus]', root);
    if (!wi.hidden && wsel.options.length !== j.gpu_count - 1) {
      wsel.innerHTML = Array.from({ length: j.gpu_count - 1 }, (_, i) => `<option>${j.gpu_count - 1 - i}</option>`).join('');
    }
    const colors = { queued: '#0284c7', scheduled: '#7c3aed', allocating: '#7c3aed', running: '#2563eb', completed: '#16a34a', failed: '#dc2626', canceled: '#64748b' };
    $('[data-role=events]', root).innerHTML = (j.events || [])
      .map((e) => `<li style="--c:${colors[e.to] || '#94a3b8'}"><b>${esc(e.to)}</b>${e.reason && e.reason !== e.to ? ` <span class="muted">${esc(e.reason)}</span>` : ''}
        <div class="when">${clock(e.at)}</div>${e.message ? `<div class="msg">${esc(e.message)}</div>` : ''}</li>`)
      .join('');
    $('[data-role=alloc]', root).innerHTML = j.allocation.length
      ? j.allocation.map((a) => `<tr><td><a href="#/nodes/${enc(a.node_id)}">${esc(a.node_id)}</a></td><td class="num">${a.gpu_id}</td><td class="mono">${esc(a.gpu_uuid)}</td><td class="num">${a.memory_gb.toFixed(0)} GB</td></tr>`).join('')
      : `<tr class="empty-row"><td colspan="4">${terminal ? 'No GPUs held now.' : 'No GPUs yet.'}</td></tr>`;
    followLog(j);
  }

  // The log: the current attempt, followed while the job may still write.
  function followLog(j) {
    const rankSel = $('[data-role=rank]', root);
    rankSel.hidden = !(j.nodes > 1);
    if (j.nodes > 1 && rankSel.options.length !== j.nodes) {
      rankSel.innerHTML = Array.from({ length: j.nodes }, (_, r) => `<option value="${r}">rank ${r}</option>`).join('');
      rankSel.value = String(rank);
    }
    const key = `${j.retry_count}:${rank}:${['queued'].includes(j.state) ? 'wait' : 'go'}`;
    if (key === logKey) return;
    logKey = key;
    if (logAbort) logAbort.abort();
    const pre = $('[data-role=log]', root);
    const terminal = ['completed', 'failed', 'canceled'].includes(j.state);
    $('[data-role=logtitle]', root).textContent = `Output (attempt ${j.retry_count}${j.nodes > 1 ? ', node rank' : ''})`;
    if (j.state === 'queued') {
      logSeq++;
      pre.textContent = '';
      $('[data-role=earlier]', root).hidden = true;
      $('[data-role=logstate]', root).textContent = 'waiting to start';
      return;
    }
    const earlier = $('[data-role=earlier]', root);
    earlier.hidden = true;
    const append = (text) => {
      const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      pre.textContent = (pre.textContent + text).slice(-LOG_KEEP);
      if (stick) pre.scrollTop = pre.scrollHeight;
    };
    pre.textContent = '';
    // Only the log's tail is fetched (a byte range); earlier parts on
    // request; a job still running is followed from where the tail ended.
    const path = `/jobs/${enc(j.id)}/logs?attempt=${j.retry_count}${rank ? `&rank=${rank}` : ''}`;
    const seq = ++logSeq;
    logPath = path;
    logAbort = new AbortController();
    const signal = logAbort.signal;
    $('[data-role=logstate]', root).textContent = terminal ? 'ended' : 'following';
    api.getRange(path, `bytes=-${LOG_PAGE}`).then(({ text, start, size }) => {
      if (seq !== logSeq) return;
      logStart = start;
      earlier.hidden = start === 0;
      append(text);
      if (terminal) return;
      return api.stream(`${path}&follow=true&offset=${size}`, append, signal).then(
        () => seq === logSeq && ($('[data-role=logstate]', root).textContent = 'ended'),
      );
    }).catch((e) => e.name !== 'AbortError' && seq === logSeq && ($('[data-role=logstate]', root).textContent = e.message));
  }

  // loadEarlier prepends the page of the log before what is shown.
  async function loadEarlier() {
    const pre = $('[data-role=log]', root);
    const earlier = $('[data-role=earlier]', root);
    const seq = logSeq;
    if (logStart <= 0) return;
    const from = Math.max(0, logStart - LOG_PAGE);
    try {
      const { text } = await api.getRange(logPath, `bytes=${from}-${logStart - 1}`);
      if (seq !== logSeq) return;
      const below = pre.scrollHeight - pre.scrollTop;
      pre.textContent = text + pre.textContent;
      pre.scrollTop = pre.scrollHeight - below; // keep the view where it was
      logStart = from;
      earlier.hidden = from === 0;
    } catch (e) {
      $('[data-role=logstate]', root).textContent = e.message;
    }
  }
  $('[data-role=earlier]', root).addEventListener('click', loadEarlier);

  async function load() {
    lastLoad = Date.now();
    try {
      render(await api.get(`/jobs/${enc(id)}`));
    } catch (e) {
      msg(e.status === 404 ? `No job ${id}.` : e.message);
    }
  }
  $('[data-role=rank]', root).addEventListener('change', (ev) => {
    rank = Number(ev.target.value) || 0;
    if (job) followLog(job);
  });
  root.addEventListener('click', async (ev) => {
    const act = ev.target.dataset.act;
    if (!act || !job) return;
    if (act === 'whatif') {
      const n = $('[data-role=whatif-gpus]', root).value;
      const out = $('[data-role=whatif-answer]', root);
      try {
        const w = await api.get(`/jobs/${enc(job.id)}/what-if?gpus=${enc(n)}`);
        const when = w.starts_now ? 'now (in the next cycle)'
          : w.estimated_start_time ? `${until(w.estimated_start_time)} (${esc(startRange(w) || clock(w.estimated_start_time))})` : 'unknown';
        out.innerHTML = `With ${gpuWord(w.gpus)}${w.nodes > 1 ? ` × ${w.nodes} nodes` : ''} it would start <b data-role="whatif-when">${when}</b>`
          + (w.estimate_basis ? ` · ${esc(w.estimate_basis)}` : '')
          + (!w.starts_now && w.pending_message ? `<div class="why">${esc(w.pending_message)}</div>` : '')
          + `<div class="muted">With ${gpuWord(w.current_gpus)} as asked: ${job.estimated_start_time ? esc(startRange(job) || clock(job.estimated_start_time)) : 'unknown'}. Nothing was changed; resubmit with --gpus ${esc(w.gpus)} to take it.</div>`;
      } catch (e) {
        out.textContent = e.message;
      }
      return;
    }
    ev.target.disabled = true;
    try {
      if (act === 'cancel') {
        if (!confirm(`Cancel job ${job.name || job.id}?`)) return;
        await api.send('DELETE', `/queue/${enc(job.id)}`);
        msg('Cancel requested.', true);
      } else {
        const p = $('[data-role=prio]', root).value;
        await api.send('PATCH', `/queue/${enc(job.id)}/priority`, { priority: p });
        msg(`Priority set to ${p}.`, true);
      }
      load();
    } catch (e) {
      msg(e.message);
    } finally {
      ev.target.disabled = false;
    }
  });
  load();
  return {
    root,
    update() {
      if (job && ['completed', 'failed', 'canceled'].includes(job.state)) return;
      clearTimeout(timer);
      const wait = Math.max(0, 500 - (Date.now() - lastLoad));
      timer = setTimeout(load, wait);
    },
    destroy() {
      clearTimeout(timer);
      if (logAbort) logAbort.abort();
    },
  };
}

// ---------- router and live updates ----------
function route() {
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || '');
  if (page && page.destroy) page.destroy();
  const section = parts[0] || 'cluster';
  if (section === 'queue') page = queuePage(params);
  else if (section === 'jobs' && parts[1]) page = jobPage(parts[1]);
  else if (section === 'jobs') page = jobsPage(params);
  else if (section === 'nodes' && parts[1]) page = nodePage(parts[1]);
  else if (section === 'bookings') page = bookingsPage(); // bookings.js
  else if (section === 'usage') page = usagePage(params); // usage.js
  else page = clusterPage();
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === (section === 'nodes' ? 'cluster' : section));
  document.title = `Corral · ${section === 'jobs' && parts[1] ? parts[1] : section}`;
  $('#main').replaceChildren(page.root);
  if (state.data) page.update(state.data);
}

function onUpdate(d) {
  state.data = d;
  state.skew = Date.parse(d.at) - Date.now();
  const s = d.status;
  const sched = $('#sched');
  sched.textContent = s.running ? `scheduling on · ${s.policy}` : 'scheduling stopped';
  sched.classList.toggle('off', !s.running);
  showEngines(s.executors || []);
  document.body.dataset.updatedAt = d.at;
  if (page) page.update(d);
}

// showEngines lists the engines the server drives (Ray, Slurm) with their
// circuit breakers: open means the cluster cannot be reached and its jobs
// wait queued (docs/ray.md).
function showEngines(list) {
  const el = $('#engines');
  const engines = list.filter((e) => e.breaker);
  el.replaceChildren(...engines.map((e) => {
    const title = `${e.name} at ${e.address || '?'}: breaker ${e.breaker}, ${e.nodes} nodes` +
      (e.last_error ? `; last error: ${e.last_error}` : '') + (e.retry_at ? `; next try ${e.retry_at}` : '');
    return h(`<span class="engine ${esc(e.breaker)}" data-engine="${esc(e.name)}" data-breaker="${esc(e.breaker)}" title="${esc(title)}">${esc(e.name)} ${e.breaker === 'closed' ? 'connected' : esc(e.breaker === 'open' ? 'unreachable' : 'reconnecting')}</span>`);
  }));
}

function onConn(s) {
  const c = $('#conn');
  c.className = 'conn ' + s;
  c.textContent = s;
}

// canActOn mirrors the server's rule: admins act on every job, users on
// their own and on those of projects they administer, viewers on none.
// notebookCell links a running notebook job to its proxy (/proxy/ID/),
// which opens for the job's owner only (docs/interactive.md).
function notebookCell(j) {
  if (j.state !== 'running') return 'reachable through /proxy/ while the job runs';
  const link = `<a href="/proxy/${enc(j.id)}/" target="_blank" rel="noopener" data-role="notebook">open the notebook</a>`;
  return state.me && state.me.user === j.user ? link : `${link} <span class="muted">(its owner only)</span>`;
}

function canActOn(j) {
  const me = state.me;
  if (!me) return false;
  if (me.role === 'admin') return true;
  return me.role === 'user' && (j.user === me.user || (me.project_admin || []).includes(j.project));
}

// ---------- sign-in ----------
function showWho() {
  const me = state.me;
  const el = h(`<span class="who" data-role="who">${esc(me.user)} · ${esc(me.role)} <button type="button" class="link" data-act="signout">sign out</button></span>`);
  el.querySelector('[data-act=signout]').addEventListener('click', async () => {
    try {
      await api.signOut();
    } finally {
      location.reload();
    }
  });
  $('.status').prepend(el);
}

function signInPage(message) {
  const root = h(`<section class="panel signin"><header><h2>Sign in</h2></header><div class="body">
    <p class="muted">This Corral server needs a token. <code>corral up</code> prints a sign-in link; an admin makes tokens with <code>corral token create</code>.</p>
    <form data-role="signin"><label>Token <input type="password" name="token" autocomplete="off" required></label>
    <button type="submit" class="btn">Sign in</button></form><div data-role="msg">${message ? `<div class="notice">${esc(message)}</div>` : ''}</div></div></section>`);
  $('form', root).addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api.signIn(ev.target.token.value.trim());
      location.reload();
    } catch (e) {
      $('[data-role=msg]', root).innerHTML = `<div class="notice">${esc(e.message)}</div>`;
    }
  });
  $('#main').replaceChildren(root);
  onConn('signed out');
}

// takeLinkToken takes a sign-in link's token (/?token=..., as corral up
// prints) out of the address, so it stays in no history or bookmark, and
// returns it ('' when there is none).
function takeLinkToken() {
  const params = new URLSearchParams(location.search);
  const token = (params.get('token') || '').trim();
  if (!params.has('token')) return '';
  params.delete('token');
  const rest = params.toString();
  history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
  return token;
}

// confirmLink asks before a sign-in link signs in: it names the user the
// link signs in as and, when someone is signed in already, who that is.
// Only its button signs in (POST /auth/session); opening the link changes
// nothing. It reports whether it is showing the question (false: the
// link is this session's own token, or is not valid, which it says).
async function confirmLink(token, me) {
  let who;
  try {
    who = await api.whoamiWith(token);
  } catch (e) {
    const msg = `The sign-in link's token is not valid (${e.message}).`;
    if (!me) signInPage(msg);
    else $('.status').prepend(h(`<span class="notice" data-role="link-msg" title="${esc(msg)}">sign-in link not valid; still ${esc(me.user)}</span>`));
    return !me;
  }
  if (me && me.token_id === who.token_id) return false;
  const them = `<b data-role="link-user">${esc(who.user)}</b> (${esc(who.role)})`;
  const question = me
    ? `You are signed in as <b data-role="current-user">${esc(me.user)}</b> (${esc(me.role)}). Sign in as ${them} instead?`
    : `This link signs you in as ${them}.`;
  const root = h(`<section class="panel signin" data-role="confirm-link"><header><h2>Sign in</h2></header><div class="body">
    <p>${question}</p>
    <button type="button" class="btn" data-act="switch">Sign in as ${esc(who.user)}</button>
    <button type="button" class="link" data-act="stay">${me ? 'Stay signed in as ' + esc(me.user) : 'Cancel'}</button>
    <div data-role="msg"></div></div></section>`);
  $('[data-act=switch]', root).addEventListener('click', async () => {
    try {
      await api.signIn(token);
      location.reload();
    } catch (e) {
      $('[data-role=msg]', root).innerHTML = `<div class="notice">${esc(e.message)}</div>`;
    }
  });
  $('[data-act=stay]', root).addEventListener('click', () => location.reload());
  $('#main').replaceChildren(root);
  onConn(me ? 'paused' : 'signed out');
  return true;
}

async function start() {
  const link = takeLinkToken();
  try {
    state.me = await api.whoami();
  } catch (e) {
    if (e.status !== 401) {
      $('#main').replaceChildren(h(`<div class="notice">${esc(e.message)}</div>`));
      return;
    }
    if (!link) return signInPage(e.code === 'session_ended' ? e.message : '');
  }
  if (link && (await confirmLink(link, state.me))) return;
  if (!state.me) return signInPage('');
  document.body.dataset.role = state.me.role;
  showWho();
  window.addEventListener('hashchange', route);
  route();
  api.subscribe(onUpdate, onConn, (reason) => {
    $('[data-role=who]')?.remove();
    signInPage(reason === 'token_expired' ? 'Your token has expired; sign in again.' : 'Your token was revoked; sign in again.');
  });
}

start();
