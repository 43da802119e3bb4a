// The dashboard: login, sessions, a session's live transcript, runs and charts. Everything is
// built with DOM calls and textContent: nothing the server returns is parsed as markup.

import { api, getKey, setKey, clearKey, setUnauthorizedHandler, Gateway, ApiError } from './api.js';
import { chart, bucket } from './charts.js';

const $ = (sel, root = document) => root.querySelector(sel);
const gw = new Gateway();
let cleanup = () => {};

function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function when(unix) {
  if (!unix) return '';
  const d = new Date(unix * 1000);
  return d.toLocaleString();
}

function short(s, n) {
  s = String(s ?? '').replace(/\s+/g, ' ').trim();
  return s.length > n ? s.slice(0, n) + '…' : s;
}

function contentText(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === 'string' ? p : p.text || '')).join('');
  return c == null ? '' : JSON.stringify(c);
}

function statusBadge(s) { return h('span', { class: 'status ' + s }, s); }

// Repeat calls f now and every ms while the view is shown; it never overlaps itself. f gets a
// function that tells whether the view has gone meanwhile (a logout, another view): a call that
// resolves after that must not start more requests.
function repeat(f, ms) {
  let stop = false, timer = null;
  const gone = () => stop;
  const tick = async () => {
    try { await f(gone); } catch (err) { if (!(err instanceof ApiError && err.status === 401)) console.warn(err); }
    if (!stop) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stop = true; clearTimeout(timer); };
}

// ---- login ----

function showLogin(message) {
  cleanup(); cleanup = () => {};
  gw.close();
  $('#nav').hidden = true;
  $('#view').hidden = true;
  $('#view').replaceChildren();
  $('#login').hidden = false;
  $('#login-error').textContent = message || '';
  $('#key').value = '';
  $('#key').focus();
}

setUnauthorizedHandler(() => {
  if (!getKey()) return;
  clearKey();
  showLogin('The server refused the key. Log in again.');
});

$('#login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const key = $('#key').value.trim();
  $('#login-error').textContent = '';
  try {
    await api('GET', '/api/sessions?limit=1', undefined, key);
  } catch (err) {
    $('#login-error').textContent = err.status === 401 ? 'The server refused this key.' : 'Cannot log in: ' + err.message;
    return;
  }
  setKey(key);
  $('#login').hidden = true;
  if (!location.hash || location.hash === '#/login') location.hash = '#/sessions';
  else route();
});

$('#logout').addEventListener('click', () => { clearKey(); showLogin('Logged out.'); });

gw.onState((s) => { $('#ws-state').textContent = s; $('#ws-state').dataset.state = s; });

// ---- sessions ----

function sessionsView(root) {
  const search = h('input', { id: 'sessions-search', type: 'search', placeholder: 'Search title, id or first message' });
  const title = h('input', { id: 'new-title', type: 'text', placeholder: 'New session title' });
  const create = h('button', { id: 'new-session', class: 'primary', type: 'button' }, 'New session');
  const body = h('tbody');
  const count = h('span', { class: 'muted', id: 'sessions-count' });
  root.append(
    h('h2', {}, 'Sessions'),
    h('div', { class: 'toolbar' }, search, count, title, create),
    h('table', { id: 'sessions-table' },
      h('thead', {}, h('tr', {}, ['Title', 'Id', 'First message', 'Status', 'Messages', 'Tokens', 'Updated'].map((t) => h('th', {}, t)))),
      body),
  );
  const previews = new Map();
  let rows = [];
  const render = () => {
    const q = search.value.trim().toLowerCase();
    const shown = rows.filter((s) => !q || [s.title, s.id, previews.get(s.id)].some((v) => (v || '').toLowerCase().includes(q)));
    count.textContent = `${shown.length} of ${rows.length}`;
    body.replaceChildren(...shown.map((s) => h('tr', { class: 'clickable session-row', dataset: { id: s.id }, onclick: () => { location.hash = '#/session/' + encodeURIComponent(s.id); } },
      h('td', {}, s.title || h('span', { class: 'muted' }, '(untitled)')),
      h('td', { class: 'mono' }, s.id),
      h('td', { class: 'preview' }, short(previews.get(s.id), 80)),
      h('td', {}, statusBadge(s.status)),
      h('td', {}, s.message_count),
      h('td', {}, s.usage ? s.usage.total_tokens : ''),
      h('td', {}, when(s.updated_at)))));
  };
  search.addEventListener('input', render);
  create.addEventListener('click', async () => {
    create.disabled = true;
    try {
      const body = title.value.trim() ? { title: title.value.trim() } : {};
      const res = await api('POST', '/api/sessions', body);
      location.hash = '#/session/' + encodeURIComponent(res.session.id);
    } catch (err) {
      count.textContent = 'Cannot create a session: ' + err.message;
    } finally { create.disabled = false; }
  });
  const loadPreview = async (id) => {
    previews.set(id, '');
    try {
      const m = await api('GET', `/api/sessions/${encodeURIComponent(id)}/messages?limit=5`);
      const first = (m.data || []).find((r) => r.role === 'user');
      previews.set(id, first ? contentText(first.content) : '');
      render();
    } catch { /* a session deleted meanwhile */ }
  };
  const stop = repeat(async (gone) => {
    const res = await api('GET', '/api/sessions?limit=200');
    if (gone()) return; // logged out or left meanwhile: no previews under no key
    rows = res.data || [];
    render();
    for (const s of rows.slice(0, 50)) if (!previews.has(s.id) && s.message_count > 0) loadPreview(s.id);
  }, 5000);
  search.focus();
  return stop;
}

// ---- one session ----

function sessionView(root, id) {
  const head = h('div', { id: 'session-head' });
  const transcript = h('div', { id: 'transcript', 'aria-live': 'polite' });
  const approvals = h('div', { id: 'approvals' });
  const turnStatus = h('p', { id: 'turn-status', class: 'muted' });
  const prompt = h('textarea', { id: 'prompt', placeholder: 'Prompt for a new run on this session' });
  const submit = h('button', { id: 'run-submit', class: 'primary', type: 'submit' }, 'Run');
  const note = h('p', { id: 'run-note', class: 'muted' });
  const form = h('form', { id: 'run-form' }, prompt, submit);
  root.append(h('p', {}, h('a', { href: '#/sessions' }, '← Sessions')), head, transcript, approvals, turnStatus, form, note);

  let rid = null;   // the gateway's runtime id of this session
  let live = null;  // the assistant bubble being streamed
  const tools = new Map();
  let gone = false;

  const renderHead = (s) => {
    head.replaceChildren(
      h('h2', {}, s.title || '(untitled)'),
      h('p', { class: 'muted' }, h('span', { class: 'mono' }, s.id), ' · ', statusBadge(s.status), ' · ', s.model || '', ' · ',
        `${s.message_count} messages · ${s.usage.total_tokens} tokens · ${s.usage.api_calls} model calls`));
  };
  const refreshHead = async () => { try { renderHead((await api('GET', '/api/sessions/' + encodeURIComponent(id))).session); } catch { /* shown by the transcript */ } };

  const bubble = (role, text) => h('div', { class: 'msg ' + role }, h('span', { class: 'role' }, role), h('span', { class: 'text' }, text));
  const toolCard = (toolId, name, ctx) => {
    const card = h('div', { class: 'tool', dataset: { toolId: toolId || '' } }, h('strong', {}, name || 'tool'), ' ', h('span', { class: 'mono' }, short(ctx, 200)));
    transcript.append(card);
    if (toolId) tools.set(toolId, card);
    return card;
  };
  const finishTool = (card, text, isError) => {
    card.classList.add(isError ? 'error' : 'done');
    card.append(h('pre', {}, short(text, 2000)));
  };

  const loadHistory = async () => {
    const res = await api('GET', `/api/sessions/${encodeURIComponent(id)}/messages?limit=1000`);
    transcript.replaceChildren();
    tools.clear();
    live = null;
    for (const r of res.data || []) {
      if (r.display_kind === 'hidden') continue;
      const text = contentText(r.content);
      if (r.role === 'tool') {
        finishTool(toolCard(r.tool_call_id, r.tool_name, ''), text, false);
      } else if (r.role === 'user' || r.role === 'assistant') {
        if (text) transcript.append(bubble(r.role, text));
      }
    }
  };

  const showApproval = (reqId, p) => {
    if (approvals.querySelector(`[data-request-id="${CSS.escape(reqId)}"]`)) return;
    const answer = (choice) => {
      try {
        gw.answer(reqId, { choice });
      } catch (err) { turnStatus.textContent = 'Cannot answer: ' + err.message; return; }
      card.remove();
      transcript.append(h('div', { class: 'tool decision' }, choice === 'deny' ? 'Denied: ' : 'Approved: ', h('span', { class: 'mono' }, short(p.command, 200))));
    };
    const card = h('div', { class: 'approval', dataset: { requestId: reqId } },
      h('strong', {}, 'Approval needed'), ' ', p.description || '',
      h('pre', { class: 'mono' }, p.command || JSON.stringify(p)),
      h('div', { class: 'actions' },
        h('button', { class: 'approve', type: 'button', onclick: () => answer('once') }, 'Approve'),
        h('button', { class: 'deny', type: 'button', onclick: () => answer('deny') }, 'Deny')));
    approvals.append(card);
  };

  const onMessage = (msg) => {
    if (msg.reconnected) { attach(); return; }
    if (msg.method === 'event') {
      const ev = msg.params || {};
      if (!rid || ev.session_id !== rid) return;
      const p = ev.payload || {};
      switch (ev.type) {
        case 'message.start':
          live = bubble('assistant', '');
          live.classList.add('streaming');
          transcript.append(live);
          turnStatus.textContent = 'working…';
          break;
        case 'message.delta':
          if (!live) { live = bubble('assistant', ''); live.classList.add('streaming'); transcript.append(live); }
          $('.text', live).textContent += p.text || '';
          break;
        case 'tool.start':
          toolCard(p.tool_id, p.name, p.context || (p.args ? JSON.stringify(p.args) : ''));
          // The model's text after the tool goes into a new bubble.
          if (live && !$('.text', live).textContent) live.remove();
          live = null;
          break;
        case 'tool.complete': {
          const card = tools.get(p.tool_id) || toolCard(p.tool_id, p.name, '');
          finishTool(card, p.result_text ?? '', p.is_error || p.blocked);
          break;
        }
        case 'status.update':
          turnStatus.textContent = p.text || p.status || '';
          break;
        case 'message.complete': {
          if (!live) { live = bubble('assistant', ''); transcript.append(live); }
          if (p.text) $('.text', live).textContent = p.text;
          if (!$('.text', live).textContent) live.remove();
          live.classList.remove('streaming');
          live.classList.add('complete');
          live = null;
          turnStatus.textContent = `turn ${p.status}` + (p.turn_exit_reason ? ` (${p.turn_exit_reason})` : '');
          refreshHead();
          break;
        }
        case 'request.cancel': {
          const card = approvals.querySelector(`[data-request-id="${CSS.escape(p.id || '')}"]`);
          if (card) card.remove();
          break;
        }
        case 'error':
          turnStatus.textContent = 'error: ' + (p.message || '');
          break;
      }
      return;
    }
    if (msg.method && msg.id !== undefined) {
      const p = msg.params || {};
      if (!rid || p.session_id !== rid) return;
      if (msg.method === 'approval') showApproval(String(msg.id), p);
      else gw.ws && gw.ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'the dashboard answers approvals only' } }));
    }
  };
  const unlisten = gw.onMessage(onMessage);

  const attach = async () => {
    try {
      await gw.connect();
      const res = await gw.call('session.resume', { session_id: id });
      if (gone) return;
      rid = res.session_id;
      await loadHistory();
      for (const q of res.open_requests || []) if (q.method === 'approval') showApproval(q.id, q.params || {});
      turnStatus.textContent = res.inflight ? 'working…' : '';
      transcript.dataset.attached = 'true';
    } catch (err) {
      turnStatus.textContent = 'Live view unavailable: ' + err.message;
      try { await loadHistory(); } catch { /* reported above */ }
    }
  };

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = prompt.value.trim();
    if (!text) return;
    submit.disabled = true;
    try {
      const run = await api('POST', '/v1/runs', { input: text, session_id: id });
      transcript.append(bubble('user', text));
      prompt.value = '';
      note.replaceChildren('Run ', h('a', { href: '#/runs', class: 'mono' }, run.run_id), ' ', run.status);
    } catch (err) {
      note.textContent = 'Cannot start a run: ' + err.message;
    } finally { submit.disabled = false; }
  });

  refreshHead();
  attach();
  return () => { gone = true; unlisten(); };
}

// ---- runs ----

function runsView(root) {
  const body = h('tbody');
  const info = h('span', { class: 'muted', id: 'runs-info' });
  root.append(h('h2', {}, 'Runs'), h('div', { class: 'toolbar' }, info),
    h('table', { id: 'runs-table' },
      h('thead', {}, h('tr', {}, ['Run', 'Session', 'Status', 'Last event', 'Created', 'Duration', 'Tokens', 'Output', ''].map((t) => h('th', {}, t)))),
      body));
  const act = async (r, choice) => {
    try {
      await api('POST', `/v1/runs/${encodeURIComponent(r.run_id)}/approval`, { choice, request_id: r.approval.request_id });
      info.textContent = `${choice === 'deny' ? 'Denied' : 'Approved'} for ${r.run_id}`;
      await load();
    } catch (err) { info.textContent = 'Cannot answer: ' + err.message; }
  };
  const load = async () => {
    const res = await api('GET', '/v1/runs?limit=200');
    body.replaceChildren(...(res.data || []).map((r) => h('tr', { class: 'run-row', dataset: { runId: r.run_id, status: r.status } },
      h('td', { class: 'mono' }, r.run_id),
      h('td', { class: 'mono' }, h('a', { href: '#/session/' + encodeURIComponent(r.session_id) }, short(r.session_id, 28))),
      h('td', { class: 'run-status' }, statusBadge(r.status)),
      h('td', {}, r.last_event || ''),
      h('td', {}, when(r.created_at)),
      h('td', {}, (r.duration_ms / 1000).toFixed(1) + ' s'),
      h('td', {}, r.usage ? r.usage.total_tokens : ''),
      h('td', { class: 'output' }, short(r.output || r.error || '', 80)),
      h('td', {}, r.status === 'waiting_for_approval' && r.approval ? h('span', { class: 'approval-inline' },
        h('code', {}, short(r.approval.command, 60)), ' ',
        h('button', { class: 'approve', type: 'button', onclick: () => act(r, 'once') }, 'Approve'), ' ',
        h('button', { class: 'deny', type: 'button', onclick: () => act(r, 'deny') }, 'Deny')) : ''))));
    info.textContent = `${res.total} runs in this server's memory (refreshed every 2 s)`;
  };
  return repeat(load, 2000);
}

// ---- charts ----

// counters reads a few series of /metrics (Prometheus text) when the key may read it; null
// otherwise (the dashboard does not depend on it).
const COUNTERS = ['hermes_turns_total', 'hermes_model_tokens_total', 'hermes_tool_calls_total', 'hermes_sessions_active', 'hermes_approvals_pending', 'hermes_admission_rejections_total'];
async function counters() {
  let text;
  try {
    const res = await fetch('/metrics', { headers: { Authorization: 'Bearer ' + getKey() }, cache: 'no-store' });
    if (!res.ok) return null;
    text = await res.text();
  } catch { return null; }
  const out = [];
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-z_]+)(\{[^}]*\})?\s+(\S+)$/);
    if (m && COUNTERS.includes(m[1])) out.push({ name: m[1] + (m[2] || ''), value: Number(m[3]) });
  }
  return out;
}

function chartsView(root) {
  const grid = h('div', { class: 'charts', id: 'charts' });
  const table = h('tbody');
  const metrics = h('section', { id: 'metrics', hidden: true }, h('h3', {}, 'Server counters (/metrics)'), h('table', {}, table));
  root.append(h('h2', {}, 'Charts'), h('p', { class: 'muted' }, 'Runs this server holds, by admission time; session tokens by last update.'), grid, metrics);
  return repeat(async () => {
    counters().then((rows) => {
      metrics.hidden = !rows;
      if (rows) table.replaceChildren(...rows.map((r) => h('tr', {}, h('td', { class: 'mono' }, r.name), h('td', {}, r.value))));
    });
    const [runs, sessions] = await Promise.all([api('GET', '/v1/runs?limit=500'), api('GET', '/api/sessions?limit=200')]);
    const rs = (runs.data || []).slice().sort((a, b) => a.created_at - b.created_at);
    const settled = rs.filter((r) => ['completed', 'failed', 'cancelled', 'interrupted'].includes(r.status));
    const ss = (sessions.data || []).slice().sort((a, b) => a.updated_at - b.updated_at);
    grid.replaceChildren(
      chart('Turns (runs)', bucket(rs.map((r) => ({ t: r.created_at, v: 1 })), 24), 'bar'),
      chart('Run tokens', bucket(settled.map((r) => ({ t: r.created_at, v: r.usage ? r.usage.total_tokens : 0 })), 24), 'bar'),
      chart('Run duration', bucket(settled.map((r) => ({ t: r.created_at, v: r.duration_ms / 1000 })), 24, true), 'line', 's'),
      chart('Session tokens', bucket(ss.map((s) => ({ t: s.updated_at, v: s.usage.total_tokens })), 24), 'bar'),
    );
  }, 10000);
}

// ---- routing ----

function route() {
  if (!getKey()) { showLogin(); return; }
  cleanup();
  $('#login').hidden = true;
  $('#nav').hidden = false;
  const view = $('#view');
  view.hidden = false;
  view.replaceChildren();
  const [, name, arg] = (location.hash || '#/sessions').match(/^#\/([^/]*)\/?(.*)$/) || [];
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.view === (name === 'session' ? 'sessions' : name));
  view.dataset.view = name || 'sessions';
  switch (name) {
    case 'session': cleanup = sessionView(view, decodeURIComponent(arg)); break;
    case 'runs': cleanup = runsView(view); break;
    case 'charts': cleanup = chartsView(view); break;
    default: cleanup = sessionsView(view);
  }
  gw.connect().catch(() => {});
}

window.addEventListener('hashchange', route);
route();
