// Drives the dashboard of a running `hermes serve --ui` in headless Chromium (puppeteer-core).
// Environment: HERMES_BASE (http://host:port), HERMES_KEY, HERMES_OTHER_KEY (a second
// principal), CHROME_BIN, DASHBOARD_HOME (a scratch directory for the browser profile).
// Each check that passes prints "step: <name>"; the last line is "dashboard: ok". Any failure
// throws (exit code 1). The Go test (TestDashboardBrowser) scripts the model and reads the
// steps: it releases the model's held answer when "step: partial answer shown" appears.
import puppeteer from 'puppeteer-core';
import assert from 'node:assert/strict';

const base = process.env.HERMES_BASE;
const key = process.env.HERMES_KEY;
const otherKey = process.env.HERMES_OTHER_KEY;
const T = 120_000; // generous: a shared, noisy machine
const step = (s) => console.log('step: ' + s);

const browser = await puppeteer.launch({
  executablePath: process.env.CHROME_BIN,
  headless: true,
  timeout: T,
  protocolTimeout: 4 * T,
  userDataDir: process.env.DASHBOARD_HOME,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
const problems = [];
let page;
try {
  page = await browser.newPage();
  page.setDefaultTimeout(T);
  // Conditions are polled on a timer in the page: the default (requestAnimationFrame) polling
  // stalled now and then on a loaded machine, with the condition long true.
  const until = (f, ...args) => page.waitForFunction(f, { polling: 100 }, ...args);
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  // Failed loads are checked by their responses below (the 401s this walk provokes are expected).
  page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push('console: ' + m.text()); });
  // A view's failed refresh is a warning on the page: shown on stderr, so a walk that times out
  // says why the view never changed.
  page.on('console', (m) => { if (m.type() === 'warning') console.error('page warning: ' + m.text()); });
  page.on('requestfailed', (r) => console.error('request failed: ' + r.method() + ' ' + new URL(r.url()).pathname + ': ' + (r.failure()?.errorText ?? '')));
  const failed = [];
  page.on('response', (r) => { if (r.status() >= 400) failed.push(r.status() + ' ' + r.request().method() + ' ' + new URL(r.url()).pathname); });

  // The page, its security headers, and the login.
  const res = await page.goto(base + '/ui/', { waitUntil: 'load' });
  assert.equal(res.status(), 200);
  const h = res.headers();
  assert.match(h['content-security-policy'], /script-src 'self'/);
  assert.match(h['content-security-policy'], /frame-ancestors 'none'/);
  assert.doesNotMatch(h['content-security-policy'], /unsafe-inline/);
  assert.equal(h['x-frame-options'], 'DENY');
  await page.waitForSelector('#login-form', { visible: true });
  step('login shown');

  // Without the key the API refuses the page's requests.
  const statuses = await page.evaluate(async () => Promise.all(['/api/sessions', '/v1/runs'].map(async (p) => (await fetch(p)).status)));
  assert.deepEqual(statuses, [401, 401]);
  step('unauthenticated api refused');

  await page.type('#key', 'not-the-key-0123456789');
  await page.click('#login-submit');
  await until(() => /refused/.test(document.querySelector('#login-error').textContent));
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  step('bad key refused');

  const login = async (k) => {
    await page.waitForSelector('#login-form', { visible: true });
    await page.$eval('#key', (e) => { e.value = ''; });
    await page.type('#key', k);
    await page.click('#login-submit');
    await page.waitForSelector('#nav', { visible: true });
    await page.click('#nav a[data-view="sessions"]');
    await page.waitForSelector('#sessions-table', { visible: true });
  };
  await login(key);
  await until(() => document.querySelector('#ws-state').dataset.state === 'live');
  step('logged in');

  // A new session, attached live over /api/ws.
  await page.type('#new-title', 'dashboard check');
  await page.click('#new-session');
  await page.waitForSelector('#transcript[data-attached="true"]');
  const sessionID = decodeURIComponent(page.url().split('#/session/')[1]);
  assert.ok(sessionID);
  step('session opened');

  // Record what the transcript shows while the turn streams.
  await page.evaluate(() => {
    window.__partial = false;
    new MutationObserver(() => {
      const b = document.querySelector('#transcript .msg.assistant.streaming .text');
      if (b && b.textContent === 'Cleaned ') window.__partial = true;
    }).observe(document.querySelector('#transcript'), { subtree: true, childList: true, characterData: true });
  });
  await page.type('#prompt', 'Clean the build directory');
  await page.click('#run-submit');
  await until(() => [...document.querySelectorAll('#transcript .tool')].some((e) => e.textContent.includes('rm -rf build')));
  step('tool card shown');
  await page.waitForSelector('#approvals .approval button.approve', { visible: true });
  const cmd = await page.$eval('#approvals .approval pre', (e) => e.textContent);
  assert.match(cmd, /rm -rf build/);
  await page.click('#approvals .approval button.approve');
  await until(() => !document.querySelector('#approvals .approval'));
  step('approved');
  await until(() => window.__partial === true);
  step('partial answer shown'); // the Go test now lets the model finish
  await until(() => {
    const done = document.querySelector('#transcript .msg.assistant.complete .text');
    return done && done.textContent === 'Cleaned the build directory.';
  });
  await until(() => [...document.querySelectorAll('#transcript .tool.done')].some((e) => e.textContent.includes('rm -rf build')));
  step('answer complete');

  // The run settles in the runs table.
  await page.click('#nav a[data-view="runs"]');
  await page.waitForSelector('#runs-table tr.run-row[data-status="completed"]');
  const row = await page.$eval('#runs-table tr.run-row[data-status="completed"]', (tr) => tr.textContent);
  assert.ok(row.includes('Cleaned the build directory.'), row);
  step('run completed in table');

  // A second run, started through the API, denied with one click in the runs table.
  const started = await page.evaluate(async (sid) => {
    const r = await fetch('/v1/runs', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + sessionStorage.getItem('hermes.apiKey'), 'Content-Type': 'application/json' },
      body: JSON.stringify({ input: 'Remove the cache', session_id: sid }),
    });
    return r.status;
  }, sessionID);
  assert.equal(started, 202);
  await page.waitForSelector('#runs-table tr.run-row[data-status="waiting_for_approval"] button.deny', { visible: true });
  const waiting = await page.$eval('#runs-table tr.run-row[data-status="waiting_for_approval"]', (tr) => tr.textContent);
  assert.ok(waiting.includes('rm -rf cache'), waiting);
  await page.click('#runs-table tr.run-row[data-status="waiting_for_approval"] button.deny');
  await until(() => [...document.querySelectorAll('#runs-table tr.run-row[data-status="completed"]')].some((tr) => tr.textContent.includes('Left the cache alone.')));
  step('run denied in table');

  // Search: by title, by the first message, and nothing for a miss.
  await page.click('#nav a[data-view="sessions"]');
  await page.waitForSelector(`#sessions-table tr.session-row[data-id="${sessionID}"]`);
  const shown = async (q) => {
    await page.$eval('#sessions-search', (e) => { e.value = ''; });
    await page.type('#sessions-search', q);
    return page.$$eval('#sessions-table tr.session-row', (rows) => rows.map((r) => r.dataset.id));
  };
  assert.deepEqual(await shown('DASHBOARD CHECK'), [sessionID]);
  await until((id) => document.querySelector(`tr.session-row[data-id="${id}"] .preview`).textContent.includes('Clean the build'), sessionID);
  assert.deepEqual(await shown('clean the build dir'), [sessionID]);
  assert.deepEqual(await shown('no-such-session-zzz'), []);
  step('search works');

  await page.click('#nav a[data-view="charts"]');
  await page.waitForSelector('figure[data-chart="Turns (runs)"] svg rect.bar');
  await page.waitForSelector('figure[data-chart="Run duration"] svg circle.dot');
  // The primary key may read /metrics: its counters are listed under the charts.
  await until(() => [...document.querySelectorAll('#metrics:not([hidden]) td')].some((td) => td.textContent.startsWith('hermes_turns_total')));
  step('charts drawn');

  // Another key: none of the first key's sessions or runs. (Log out from the sessions view:
  // the next login lands where the last one left.)
  await page.click('#nav a[data-view="sessions"]');
  await page.waitForSelector('#sessions-table', { visible: true });
  await page.click('#logout');
  await page.waitForSelector('#login-form', { visible: true });
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  step('logged out');
  await login(otherKey);
  await until(() => /^0 of 0$/.test(document.querySelector('#sessions-count').textContent));
  await page.click('#nav a[data-view="runs"]');
  await until(() => /^0 runs/.test(document.querySelector('#runs-info').textContent));
  assert.equal(await page.$$eval('#runs-table tr.run-row', (r) => r.length), 0);
  step('other key sees nothing');

  assert.deepEqual(problems, []);
  // The only failed loads: the two unauthenticated calls and the refused key's login check.
  assert.deepEqual(failed.sort(), ['401 GET /api/sessions', '401 GET /api/sessions', '401 GET /v1/runs']);
  console.log('dashboard: ok');
} catch (err) {
  // Where the page stood when the walk failed: which view, what it showed, and the last
  // requests it completed.
  const state = await page?.evaluate(() => ({
    hash: location.hash,
    view: document.querySelector('#view')?.dataset.view,
    runsInfo: document.querySelector('#runs-info')?.textContent,
    sessionsCount: document.querySelector('#sessions-count')?.textContent,
    ws: document.querySelector('#ws-state')?.dataset.state,
    last: performance.getEntriesByType('resource').slice(-8).map((e) => `${e.name.replace(location.origin, '')} ${Math.round(e.startTime)}+${Math.round(e.duration)}ms`),
    now: Math.round(performance.now()),
  })).catch((e) => 'page state unavailable: ' + e.message);
  console.error('page state: ' + JSON.stringify(state));
  throw err;
} finally {
  await browser.close();
}
