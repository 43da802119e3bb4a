// The API client of the dashboard: the key (sessionStorage, this tab only), JSON requests with
// the key as a bearer token, and the WebSocket gateway (/api/ws) as a small JSON-RPC client.

const KEY = 'hermes.apiKey';

export function getKey() { return sessionStorage.getItem(KEY) || ''; }
export function setKey(k) { sessionStorage.setItem(KEY, k); }
export function clearKey() { sessionStorage.removeItem(KEY); }

// ApiError carries the status and the OpenAI error envelope's message and code.
export class ApiError extends Error {
  constructor(status, message, code) { super(message); this.status = status; this.code = code; }
}

// onUnauthorized is called when the server refuses the key (401): the app shows the login.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(f) { onUnauthorized = f; }

export async function api(method, path, body, key = getKey()) {
  const headers = { Authorization: 'Bearer ' + key };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const e = (data && data.error) || {};
    if (res.status === 401) onUnauthorized();
    throw new ApiError(res.status, e.message || res.statusText || 'request failed', e.code || '');
  }
  return data;
}

// base64url of a string's UTF-8 bytes, without padding: the key as a subprotocol token.
function b64url(s) {
  const bytes = new TextEncoder().encode(s);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// Gateway is one /api/ws connection: call() sends a request and resolves with its result;
// event notifications and server→client requests (approvals) go to the listeners; answer()
// replies to a server request. It reconnects after a drop while the key is set.
export class Gateway {
  constructor() {
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Set();
    this.stateListeners = new Set();
    this.ready = null;
    this.closed = false;
    this.retry = 500;
  }

  onMessage(f) { this.listeners.add(f); return () => this.listeners.delete(f); }
  onState(f) { this.stateListeners.add(f); }
  setState(s) { for (const f of this.stateListeners) f(s); }

  // connect resolves once the connection is open and has opted in to server requests.
  connect() {
    if (this.ready) return this.ready;
    this.closed = false;
    const key = getKey();
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/ws';
    this.ready = new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new WebSocket(url, ['hermes.v1', 'hermes.key.' + b64url(key)]);
      } catch (err) { this.ready = null; reject(err); return; }
      this.ws = ws;
      let opened = false;
      ws.onopen = async () => {
        opened = true;
        try {
          await this.call('client.capabilities', { server_requests: true });
          this.retry = 500;
          this.setState('live');
          resolve(this);
        } catch (err) { reject(err); }
      };
      ws.onmessage = (ev) => this.dispatch(ev.data);
      ws.onclose = (ev) => {
        for (const [, p] of this.pending) p.reject(new Error('connection closed'));
        this.pending.clear();
        this.ws = null;
        this.ready = null;
        this.setState(ev.code === 4401 ? 'refused' : 'offline');
        if (!opened) reject(new Error(ev.code === 4401 ? 'the key was refused' : 'cannot connect'));
        if (ev.code === 4401) { onUnauthorized(); return; }
        if (!this.closed && getKey()) {
          setTimeout(() => { if (!this.closed) this.connect().then(() => this.emit({ reconnected: true }), () => {}); }, this.retry);
          this.retry = Math.min(this.retry * 2, 10000);
        }
      };
    });
    return this.ready;
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close(1000);
  }

  emit(msg) { for (const f of [...this.listeners]) f(msg); }

  dispatch(raw) {
    let msg;
    try { msg = JSON.parse(raw); } catch { return; }
    if (msg.id !== undefined && msg.method === undefined) {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(Object.assign(new Error(msg.error.message), { code: msg.error.code, data: msg.error.data }));
      else p.resolve(msg.result);
      return;
    }
    this.emit(msg);
  }

  call(method, params) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error('not connected'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params: params || {} }));
    });
  }

  answer(id, result) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new Error('not connected');
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, result }));
  }
}
