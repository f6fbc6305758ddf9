// charts.js: small SVG time-series charts, no library.

const NS = 'http://www.w3.org/2000/svg';

function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

// niceMax rounds a maximum up to 1, 2, 2.5 or 5 times a power of ten.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function timeLabel(t, span) {
  const d = new Date(t);
  const hm = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hour12: false });
  return span > 20 * 3600e3 && d.getHours() === 0 ? d.toLocaleDateString([], { month: 'short', day: 'numeric' }) : hm;
}

// lineChart draws series of [time ms, value] points into container.
// opts: {series: [{name, color, points, area}], yMax (fixed), minMax (the
// least top), integer (counts: a top divisible by 4), unit, fmt, height,
// step (ms: a gap wider than 2.5 steps breaks the line), since, until}.
export function lineChart(container, opts) {
  const width = Math.max(container.clientWidth || 0, 240);
  const height = opts.height || 170;
  const m = { l: 44, r: 10, t: 10, b: 22 };
  const w = width - m.l - m.r;
  const h = height - m.t - m.b;
  const fmt = opts.fmt || ((v) => (Math.abs(v) >= 100 ? v.toFixed(0) : +v.toFixed(1)) + (opts.unit || ''));
  let t0 = opts.since;
  let t1 = opts.until;
  let vmax = 0;
  for (const s of opts.series) {
    for (const [t, v] of s.points) {
      if (t0 === undefined || t < t0) t0 = t;
      if (t1 === undefined || t > t1) t1 = t;
      if (v > vmax) vmax = v;
    }
  }
  const floor = Math.max(vmax, opts.minMax || 0);
  const ymax = opts.yMax || (opts.integer ? Math.max(4, Math.ceil(floor / 4) * 4) : niceMax(floor * 1.05));
  if (t0 === undefined) t0 = Date.now() - 3600e3;
  if (t1 === undefined || t1 <= t0) t1 = t0 + 60e3;
  const x = (t) => m.l + ((t - t0) / (t1 - t0)) * w;
  const y = (v) => m.t + h - (Math.min(v, ymax) / ymax) * h;

  const svg = el('svg', { width, height, class: 'chart', role: 'img', 'aria-label': opts.label || 'chart' });
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4;
    el('line', { x1: m.l, x2: m.l + w, y1: y(v), y2: y(v), class: 'grid' }, svg);
    el('text', { x: m.l - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, svg).textContent = fmt(v);
  }
  const ticks = Math.max(2, Math.floor(w / 90));
  for (let i = 0; i <= ticks; i++) {
    const t = t0 + ((t1 - t0) * i) / ticks;
    el('text', { x: x(t), y: height - 6, 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle', class: 'tick' }, svg)
      .textContent = timeLabel(t, t1 - t0);
  }
  const gap = (opts.step || 0) * 2.5;
  for (const s of opts.series) {
    const runs = [];
    let run = [];
    let prev = null;
    for (const p of s.points) {
      if (prev !== null && gap > 0 && p[0] - prev > gap) {
        runs.push(run);
        run = [];
      }
      run.push(p);
      prev = p[0];
    }
    runs.push(run);
    for (const r of runs) {
      if (r.length === 0) continue;
      const pts = r.length === 1 ? [r[0], [r[0][0] + 1, r[0][1]]] : r;
      const d = pts.map((p, i) => (i ? 'L' : 'M') + x(p[0]).toFixed(1) + ',' + y(p[1]).toFixed(1)).join('');
      if (s.area) {
        el('path', { d: d + `L${x(pts[pts.length - 1][0]).toFixed(1)},${y(0)}L${x(pts[0][0]).toFixed(1)},${y(0)}Z`, fill: s.color, opacity: 0.15 }, svg);
      }
      el('path', { d, fill: 'none', stroke: s.color, 'stroke-width': 1.8, 'stroke-linejoin': 'round' }, svg);
    }
  }
  if (opts.series.every((s) => s.points.length === 0)) {
    el('text', { x: m.l + w / 2, y: m.t + h / 2, 'text-anchor': 'middle', class: 'empty' }, svg).textContent = 'no samples yet';
  }

  // Hover: a rule and the values at the nearest time.
  const rule = el('line', { y1: m.t, y2: m.t + h, class: 'rule', visibility: 'hidden' }, svg);
  const tip = document.createElement('div');
  tip.className = 'tip';
  tip.hidden = true;
  svg.addEventListener('mousemove', (ev) => {
    const r = svg.getBoundingClientRect();
    const t = t0 + ((ev.clientX - r.left - m.l) / w) * (t1 - t0);
    const lines = [];
    let at = null;
    for (const s of opts.series) {
      let best = null;
      for (const p of s.points) if (best === null || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
      if (best) {
        at = best[0];
        lines.push(`<span style="color:${s.color}">●</span> ${s.name}: <b>${fmt(best[1])}</b>`);
      }
    }
    if (at === null) return;
    rule.setAttribute('x1', x(at));
    rule.setAttribute('x2', x(at));
    rule.setAttribute('visibility', 'visible');
    tip.innerHTML = `<div>${new Date(at).toLocaleString()}</div>` + lines.join('<br>');
    tip.hidden = false;
    tip.style.left = Math.min(ev.clientX - r.left + 12, width - 200) + 'px';
    tip.style.top = '4px';
  });
  svg.addEventListener('mouseleave', () => {
    rule.setAttribute('visibility', 'hidden');
    tip.hidden = true;
  });

  const legend = document.createElement('div');
  legend.className = 'legend';
  legend.innerHTML = opts.series.map((s) => `<span><i style="background:${s.color}"></i>${s.name}</span>`).join('');
  container.replaceChildren(svg, tip, legend);
}

// sparkline draws one small series without axes.
export function sparkline(container, points, opts) {
  const width = Math.max(container.clientWidth || 0, 80);
  const height = opts.height || 28;
  const svg = el('svg', { width, height, class: 'spark' });
  if (points.length > 1) {
    const t0 = points[0][0];
    const t1 = points[points.length - 1][0] || t0 + 1;
    const ymax = opts.yMax || Math.max(...points.map((p) => p[1]), 1);
    const d = points
      .map((p, i) => (i ? 'L' : 'M') + ((width * (p[0] - t0)) / (t1 - t0 || 1)).toFixed(1) + ',' + (height - 2 - ((height - 4) * Math.min(p[1], ymax)) / ymax).toFixed(1))
      .join('');
    el('path', { d: d + `L${width},${height}L0,${height}Z`, fill: opts.color, opacity: 0.12 }, svg);
    el('path', { d, fill: 'none', stroke: opts.color, 'stroke-width': 1.5 }, svg);
  }
  container.replaceChildren(svg);
}
