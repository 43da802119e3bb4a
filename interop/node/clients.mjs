// Third-party OpenAI clients, used as their READMEs show, against a real `hermes serve`
// (driven by TestNodeClients in openai_clients_test.go, whose fake model plays the answers in
// the order this script asks its questions).
//
// Every client walks four scenarios:
//   text    a streamed answer
//   tool    a streamed answer while the server runs a tool (read_file) first
//   inband  the model fails after the stream started: the client raises its own error
//   early   a streamed request refused before the stream started (an unknown model, 404):
//           the client raises its own error
//   retry   no stream; the tool runs, then the model fails: the client raises its own error,
//           and whatever it retries at its default settings never runs the tool again (the
//           server replays its answer, marked X-Hermes-Replayed)
// The retry scenarios run last, all clients at once, each started once the one before it had
// its first answer, so the AI SDK's backoff (2 s, then 4 s) is waited for only once.
import OpenAI4 from 'openai-v4';
import OpenAI7 from 'openai-v7';
import { generateText, streamText } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { createInterface } from 'node:readline';

const baseURL = need('HERMES_URL');
const apiKey = need('HERMES_API_KEY');
const notes = need('HERMES_NOTES');
const model = 'hermes-agent';

function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`missing environment variable ${name}`);
    process.exit(2);
  }
  return v;
}

class Failure extends Error {}

function check(cond, what, got) {
  if (!cond) {
    throw new Failure(`${what}${got === undefined ? '' : `: got ${describe(got)}`}`);
  }
}

function describe(v) {
  if (v instanceof Error) return `${v.constructor?.name}: ${v.message}`;
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

// recorder is a fetch that notes the status of every answer to a POST, and whether the
// server marked it a replay; first resolves when the first answer arrived.
function recorder() {
  const r = { attempts: [] };
  let seen;
  r.first = new Promise((resolve) => {
    seen = resolve;
  });
  r.fetch = async (url, init) => {
    const res = await fetch(url, init);
    if ((init?.method ?? 'GET') === 'POST') {
      r.attempts.push({ status: res.status, replayed: res.headers.get('x-hermes-replayed') === 'true' });
      seen();
    }
    return res;
  };
  return r;
}

// expectThrow runs fn and returns what it threw.
async function expectThrow(what, fn) {
  try {
    await fn();
  } catch (e) {
    if (e instanceof Failure) throw e;
    return e;
  }
  throw new Failure(`${what}: no error`);
}

function refused(e) {
  const msgs = [e?.message, e?.lastError?.message, e?.error?.message, e?.cause?.message];
  return msgs.some((m) => typeof m === 'string' && m.includes('the model refused'));
}

// checkRetried checks the retry scenario's HTTP attempts: the first answered 409, and every
// later one (the client's own retries) was a replay.
function checkRetried(rec, want) {
  const a = rec.attempts;
  check(a.length === want, `${want} attempt(s) at the client's default retry settings`, a);
  check(a[0].status === 409 && !a[0].replayed, 'the first attempt ran the turn and answered 409', a);
  check(a.slice(1).every((x) => x.status === 409 && x.replayed), 'every retry was answered by a replay', a);
}

const tag = (client, what) => `${client}: ${what}`;

// Each client: { name, text(prompt) -> text, tool(prompt) -> text, inband(prompt) -> error,
// retry(prompt, rec) -> error, attempts }.
function openaiRaw(name, OpenAI) {
  const mk = (rec) => new OpenAI({ baseURL, apiKey, ...(rec ? { fetch: rec.fetch } : {}) });
  const client = mk();
  const streamed = async (prompt, m = model) => {
    const stream = await client.chat.completions.create({ model: m, messages: [{ role: 'user', content: prompt }], stream: true });
    let text = '';
    for await (const chunk of stream) {
      // The README's loop: every chunk must have choices[0].
      text += chunk.choices[0]?.delta?.content || '';
      check(Array.isArray(chunk.choices) && chunk.choices.length === 1, 'every chunk has one choice', chunk);
    }
    return text;
  };
  return {
    name,
    text: streamed,
    tool: streamed,
    inband: (prompt) => expectThrow('in-band error', () => streamed(prompt)),
    early: async (prompt) => {
      const e = await expectThrow('refused stream', () => streamed(prompt, 'no-such-model'));
      check(e instanceof OpenAI.NotFoundError && e.code === 'model_not_found', 'a NotFoundError model_not_found', e);
    },
    retry: async (prompt, rec) => {
      const e = await expectThrow('failed turn', () => mk(rec).chat.completions.create({ model, messages: [{ role: 'user', content: prompt }] }));
      check(e instanceof OpenAI.APIError && e.status === 409 && e.code === 'turn_failed', 'an APIError 409 turn_failed', e);
      check(e instanceof OpenAI.ConflictError, 'a ConflictError', e);
      return e;
    },
    attempts: 1, // x-should-retry: false
    check(e) {
      check(e instanceof OpenAI.APIError, 'an APIError', e);
    },
  };
}

function openaiResponses(name, OpenAI) {
  const mk = (rec) => new OpenAI({ baseURL, apiKey, ...(rec ? { fetch: rec.fetch } : {}) });
  const client = mk();
  const streamed = async (prompt, m = model) => {
    const stream = await client.responses.create({ model: m, input: prompt, stream: true });
    let text = '';
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    return text;
  };
  return {
    name,
    text: streamed,
    tool: streamed,
    inband: (prompt) => expectThrow('in-band error', () => streamed(prompt)),
    early: async (prompt) => {
      const e = await expectThrow('refused stream', () => streamed(prompt, 'no-such-model'));
      check(e instanceof OpenAI.NotFoundError && e.code === 'model_not_found', 'a NotFoundError model_not_found', e);
    },
    retry: async (prompt, rec) => {
      const e = await expectThrow('failed turn', () => mk(rec).responses.create({ model, input: prompt }));
      check(e instanceof OpenAI.ConflictError && e.code === 'turn_failed', 'a ConflictError turn_failed', e);
      return e;
    },
    attempts: 1,
    check(e) {
      check(e instanceof OpenAI.APIError, 'an APIError', e);
    },
  };
}

// The AI SDK: generateText and streamText over a provider's language model.
function aiSDK(name, modelOf) {
  const streamed = async (prompt, m = modelOf()) => {
    const errors = [];
    const result = streamText({ model: m, prompt, onError: ({ error }) => errors.push(error) });
    let text = '';
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'error') errors.push(part.error);
    }
    if (errors.length > 0) throw errors[0];
    return text;
  };
  return {
    name,
    text: streamed,
    tool: streamed,
    inband: (prompt) => expectThrow('in-band error', () => streamed(prompt)),
    early: async (prompt) => {
      const e = await expectThrow('refused stream', () => streamed(prompt, modelOf(undefined, 'no-such-model')));
      const last = e.lastError ?? e;
      check(last.statusCode === 404 && !last.isRetryable, 'an APICallError 404, not retried', e);
    },
    retry: async (prompt, rec) => {
      const e = await expectThrow('failed turn', () => generateText({ model: modelOf(rec.fetch), prompt }));
      const last = e.lastError ?? e;
      check(last.statusCode === 409, 'the last attempt failed with status 409', e);
      return e;
    },
    attempts: 3, // maxRetries 2: the AI SDK retries a 409 whatever the headers say
    check(e) {
      check(e instanceof Error, 'an Error', e);
    },
  };
}

function langchain(name, useResponsesApi) {
  const mk = (rec, m = model) =>
    new ChatOpenAI({ model: m, apiKey, useResponsesApi, configuration: { baseURL, ...(rec ? { fetch: rec.fetch } : {}) } });
  const llm = mk();
  const streamed = async (prompt, l = llm) => {
    let text = '';
    for await (const chunk of await l.stream(prompt)) {
      text += typeof chunk.content === 'string' ? chunk.content : chunk.text;
    }
    return text;
  };
  return {
    name,
    text: streamed,
    tool: streamed,
    inband: (prompt) => expectThrow('in-band error', () => streamed(prompt)),
    early: async (prompt) => {
      const e = await expectThrow('refused stream', () => streamed(prompt, mk(undefined, 'no-such-model')));
      check((e.status ?? e.response?.status) === 404, 'status 404', e);
    },
    retry: async (prompt, rec) => {
      const e = await expectThrow('failed turn', () => mk(rec).invoke(prompt));
      check((e.status ?? e.response?.status) === 409, 'status 409', e);
      return e;
    },
    attempts: 1, // LangChain does not retry a 409
    check(e) {
      check(e instanceof Error, 'an Error', e);
    },
  };
}

const compat = createOpenAICompatible({ name: 'hermes', baseURL, apiKey });
const clients = [
  openaiRaw('openai@4 chat', OpenAI4),
  openaiRaw('openai@7 chat', OpenAI7),
  openaiResponses('openai@7 responses', OpenAI7),
  aiSDK('ai openai-compatible', (f, m = model) => (f ? createOpenAICompatible({ name: 'hermes', baseURL, apiKey, fetch: f }) : compat).chatModel(m)),
  aiSDK('ai @ai-sdk/openai chat', (f, m = model) => createOpenAI({ baseURL, apiKey, ...(f ? { fetch: f } : {}) }).chat(m)),
  aiSDK('ai @ai-sdk/openai responses', (f, m = model) => createOpenAI({ baseURL, apiKey, ...(f ? { fetch: f } : {}) }).responses(m)),
  langchain('langchain chat', false),
  langchain('langchain responses', true),
];

async function main() {
  // The order of the fake model's script: per client text, tool, inband; then the retry
  // scenarios, client by client.
  console.log(`CLIENTS ${clients.map((c) => c.name).join('|')}`);
  const rl = createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once('line', resolve)); // the model's script is ready
  rl.close();
  for (const c of clients) {
    const text = await c.text(`${c.name}: say hello`);
    check(text === `Hello from ${c.name}.`, tag(c.name, 'streamed text'), text);
    console.error(`ok   ${tag(c.name, 'streamed text')}`);

    const tool = await c.tool(`${c.name}: what do my notes say?`);
    check(tool === `Notes: ${notes}`, tag(c.name, 'streamed text after the tool'), tool);
    console.error(`ok   ${tag(c.name, 'stream while a tool runs')}`);

    const e = await c.inband(`${c.name}: fail after the stream started`);
    c.check(e);
    check(refused(e), tag(c.name, 'the model failure reaches the client'), e);
    console.error(`ok   ${tag(c.name, 'failure after the stream started')}`);

    await c.early(`${c.name}: refused before the stream`);
    console.error(`ok   ${tag(c.name, 'streamed request refused before the stream started')}`);
  }
  const pending = [];
  for (const c of clients) {
    const rec = recorder();
    const done = c.retry(`${c.name}: read my notes, then fail`, rec).then(
      (e) => {
        check(refused(e), tag(c.name, 'the model failure reaches the client'), e);
        checkRetried(rec, c.attempts);
        console.error(`ok   ${tag(c.name, `failure before the stream, ${rec.attempts.length} attempt(s), the tool ran once`)}`);
      },
      (err) => {
        throw new Failure(`${c.name}: ${err.message}`);
      },
    );
    pending.push(done);
    // The next client's turn may only ask the model once this one's turn is over.
    await Promise.race([rec.first, done]);
  }
  await Promise.all(pending);
}

try {
  await main();
  console.log('ALL OK');
} catch (e) {
  console.error(`FAIL ${e instanceof Failure ? e.message : e?.stack ?? e}`);
  process.exit(1);
}
