// Small inline-SVG charts: bars or a line over time, drawn with DOM calls (no markup strings).

const NS = 'http://www.w3.org/2000/svg';
const W = 360, H = 160, PAD = { l: 40, r: 8, t: 8, b: 22 };

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + 'M';
  if (v >= 1e4) return Math.round(v / 1e3) + 'k';
  if (v >= 1e3) return (v / 1e3).toFixed(1) + 'k';
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

function clock(t) {
  const d = new Date(t * 1000);
  return d.toTimeString().slice(0, 5);
}

// bucket sums (or averages) values per time bucket: points are {t (unix seconds), v}. The span
// of the points is cut into n buckets.
export function bucket(points, n, average) {
  if (!points.length) return [];
  const t0 = Math.min(...points.map((p) => p.t));
  const t1 = Math.max(...points.map((p) => p.t));
  const step = Math.max((t1 - t0) / n, 60);
  const out = [];
  for (let i = 0; i <= Math.floor((t1 - t0) / step); i++) out.push({ t: t0 + i * step, v: 0, n: 0 });
  for (const p of points) {
    const b = out[Math.min(Math.floor((p.t - t0) / step), out.length - 1)];
    b.v += p.v;
    b.n++;
  }
  if (average) for (const b of out) b.v = b.n ? b.v / b.n : 0;
  return out;
}

// chart returns a figure: kind 'bar' or 'line' over points {t, v} sorted by t.
export function chart(title, points, kind, unit) {
  const fig = document.createElement('figure');
  fig.className = 'chart';
  fig.dataset.chart = title;
  const h = document.createElement('h3');
  h.textContent = title + (unit ? ' (' + unit + ')' : '');
  fig.append(h);
  const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
  fig.append(svg);
  const iw = W - PAD.l - PAD.r, ih = H - PAD.t - PAD.b;
  svg.append(el('line', { class: 'axis', x1: PAD.l, y1: PAD.t + ih, x2: PAD.l + iw, y2: PAD.t + ih }));
  svg.append(el('line', { class: 'axis', x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: PAD.t + ih }));
  if (!points.length) {
    svg.append(el('text', { x: PAD.l + iw / 2, y: PAD.t + ih / 2, 'text-anchor': 'middle' }, 'no data yet'));
    return fig;
  }
  const max = Math.max(...points.map((p) => p.v), 1);
  const y = (v) => PAD.t + ih - (v / max) * ih;
  svg.append(el('text', { x: PAD.l - 4, y: PAD.t + 8, 'text-anchor': 'end' }, fmt(max)));
  svg.append(el('text', { x: PAD.l - 4, y: PAD.t + ih, 'text-anchor': 'end' }, '0'));
  const n = points.length;
  const slot = iw / n;
  const x = (i) => PAD.l + slot * i + slot / 2;
  if (kind === 'bar') {
    points.forEach((p, i) => {
      const r = el('rect', { class: 'bar', x: x(i) - Math.max(slot * 0.35, 1), y: y(p.v), width: Math.max(slot * 0.7, 2), height: PAD.t + ih - y(p.v) });
      r.append(el('title', {}, clock(p.t) + ': ' + fmt(p.v)));
      svg.append(r);
    });
  } else {
    svg.append(el('polyline', { class: 'line', points: points.map((p, i) => `${x(i)},${y(p.v)}`).join(' ') }));
    points.forEach((p, i) => {
      const c = el('circle', { class: 'dot', cx: x(i), cy: y(p.v), r: 2.5 });
      c.append(el('title', {}, clock(p.t) + ': ' + fmt(p.v)));
      svg.append(c);
    });
  }
  svg.append(el('text', { x: PAD.l, y: H - 6 }, clock(points[0].t)));
  svg.append(el('text', { x: PAD.l + iw, y: H - 6, 'text-anchor': 'end' }, clock(points[n - 1].t)));
  return fig;
}
