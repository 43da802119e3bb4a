// The official `openai` npm client against a real `hermes serve`.
//
// Run by the Go test TestOpenAINodeClient, which starts the server over a fake model whose
// answers are scripted in the order this script asks its questions. Environment:
//   HERMES_URL        base URL ending in /v1
//   HERMES_API_KEY    the server's key
//   HERMES_MODEL      the model id /v1/models lists
//   HERMES_HELD_TURNS the server's concurrency cap (streams held to provoke a 429)
//   HERMES_NOTES      the text of notes.txt in the server's working directory
// Prints "HOLDING" on stdout once it has seen the 429 with every slot held; the Go test then
// releases the held model answers. Exits non-zero with a diagnostic on the first failure.

import OpenAI, {
  APIError,
  AuthenticationError,
  BadRequestError,
  NotFoundError,
  RateLimitError,
} from 'openai';

const baseURL = need('HERMES_URL');
const apiKey = need('HERMES_API_KEY');
const model = need('HERMES_MODEL');
const heldTurns = Number(need('HERMES_HELD_TURNS'));
const notes = need('HERMES_NOTES');

const client = new OpenAI({ baseURL, apiKey, timeout: 60_000 });

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
    throw new Failure(`${what}${got === undefined ? '' : `: got ${JSON.stringify(got)}`}`);
  }
}

function log(...args) {
  console.error('  ', ...args);
}

let current = '';
async function step(name, fn) {
  current = name;
  await fn();
  console.error(`ok   ${name}`);
}

// expectError runs fn and checks the SDK raised the given class with status and code.
async function expectError(what, fn, cls, status, code) {
  try {
    await fn();
  } catch (e) {
    check(e instanceof cls, `${what}: error class ${cls.name}`, `${e?.constructor?.name}: ${e?.message}`);
    check(e instanceof APIError, `${what}: an APIError`);
    check(e.status === status, `${what}: status ${status}`, e.status);
    check(e.code === code, `${what}: code ${code}`, e.code);
    check(typeof e.type === 'string' && e.type !== '', `${what}: a type`, e.type);
    check(typeof e.message === 'string' && e.message !== '', `${what}: a message`, e.message);
    return e;
  }
  throw new Failure(`${what}: no error, want ${cls.name} ${status} ${code}`);
}

// collect reads a raw chat stream. Chunks without choices are the server's named
// hermes.tool.progress events, which the SDK yields like chunks (it only special-cases
// thread.* events); they are returned apart.
async function collect(stream) {
  const out = { text: '', roles: [], finishes: [], usage: null, progress: [], ids: new Set() };
  for await (const chunk of stream) {
    // hermes.tool.progress events arrive as chunks with a tool field and an empty choices array.
    if (typeof chunk.tool === 'string') {
      check(Array.isArray(chunk.choices) && chunk.choices.length === 0, 'progress chunk carries choices: []', chunk);
      out.progress.push(chunk);
      continue;
    }
    out.ids.add(chunk.id);
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta?.role) out.roles.push(c.delta.role);
      if (c.delta?.content) out.text += c.delta.content;
      if (c.finish_reason) out.finishes.push(c.finish_reason);
    }
  }
  return out;
}

async function main() {
  await step('models list and retrieve', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    check(ids.includes(model), `models.list includes ${model}`, ids);
    const m = page.data.find((x) => x.id === model);
    check(m.object === 'model' && typeof m.created === 'number' && m.owned_by === 'openai', 'model object', m);
    const one = await client.models.retrieve(model);
    check(one.id === model && one.object === 'model', 'models.retrieve', one);
  });

  await step('chat completion, plain', async () => {
    // What frontends send besides model and messages (LibreChat's sampling defaults, a user
    // id, metadata, both token limits, content as parts with vendor extras): all tolerated.
    const c = await client.chat.completions.create({
      model,
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'Answer briefly.', cache_control: { type: 'ephemeral' } }] },
        { role: 'user', content: [{ type: 'text', text: 'Node: plain question' }] },
      ],
      temperature: 1,
      top_p: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      max_tokens: 256,
      max_completion_tokens: 256,
      user: 'user-1',
      metadata: { origin: 'interop' },
    });
    check(c.object === 'chat.completion', 'object', c.object);
    check(c.choices.length === 1, 'one choice', c.choices);
    check(c.choices[0].message.content === 'Plain answer.', 'content', c.choices[0].message);
    check(c.choices[0].message.role === 'assistant', 'role', c.choices[0].message.role);
    check(c.choices[0].finish_reason === 'stop', 'finish_reason', c.choices[0].finish_reason);
    check(c.usage && c.usage.total_tokens > 0, 'usage', c.usage);
    check(typeof c._request_id === 'string' && c._request_id !== '', 'x-request-id exposed as _request_id', c._request_id);
  });

  await step('chat completion, streamed', async () => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Node: streamed question' }],
      stream: true,
      stream_options: { include_usage: true },
      user: { id: 'u-1', name: 'Open WebUI sends an object here' }, // must not be a 400
    });
    const r = await collect(stream);
    check(r.text === 'Streamed answer.', 'streamed text', r.text);
    check(r.roles.length === 1 && r.roles[0] === 'assistant', 'role exactly once', r.roles);
    check(r.finishes.length === 1 && r.finishes[0] === 'stop', 'finish_reason exactly once', r.finishes);
    check(r.usage && r.usage.total_tokens > 0, 'usage chunk', r.usage);
    check(r.ids.size === 1, 'one id on every chunk', [...r.ids]);
    check(r.progress.length === 0, 'no tool progress without tools', r.progress);
  });

  await step('chat completion, streamed with tool progress', async () => {
    // Tool progress is asked for with the header; a default stream is chunks only.
    const stream = await client.chat.completions.create(
      {
        model,
        messages: [{ role: 'user', content: 'Node: what do my notes say?' }],
        stream: true,
      },
      { headers: { 'X-Hermes-Tool-Progress': 'true' } },
    );
    const r = await collect(stream);
    check(r.text === `The notes say: ${notes}`, 'final text after the tool', r.text);
    check(r.finishes.length === 1 && r.finishes[0] === 'stop', 'finish_reason', r.finishes);
    const statuses = r.progress.map((p) => `${p.tool}:${p.status}`);
    check(
      statuses.length === 2 && statuses[0] === 'read_file:running' && statuses[1] === 'read_file:completed',
      'hermes.tool.progress running then completed',
      r.progress,
    );
    check(r.progress[0].toolCallId && r.progress[0].toolCallId === r.progress[1].toolCallId, 'one toolCallId', r.progress);
    check(r.progress[0].label === 'notes.txt', 'progress label', r.progress[0].label);
  });

  let firstResponse = '';
  await step('responses, plain', async () => {
    const r = await client.responses.create({ model, input: 'Node: a response please' });
    check(r.object === 'response' && r.status === 'completed', 'object and status', r);
    check(r.id.startsWith('resp_'), 'id', r.id);
    check(r.output_text === 'Response one.', 'output_text', r.output_text);
    const got = await client.responses.retrieve(r.id);
    check(got.id === r.id && got.output_text === 'Response one.', 'retrieve', got);
    firstResponse = r.id;
  });

  await step('responses, streamed', async () => {
    const stream = await client.responses.create({ model, input: 'Node: stream a response', stream: true });
    const types = [];
    let text = '';
    let seq = -1;
    let final = null;
    for await (const ev of stream) {
      check(ev.sequence_number === seq + 1, `sequence_number after ${seq} (${ev.type})`, ev.sequence_number);
      seq = ev.sequence_number;
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') final = ev.response;
    }
    check(types[0] === 'response.created', 'first event', types);
    check(types.at(-1) === 'response.completed', 'terminal event last', types);
    check(types.filter((t) => t.startsWith('response.completed') || t === 'response.failed' || t === 'response.incomplete').length === 1, 'one terminal event', types);
    check(text === 'Streamed response.', 'deltas', text);
    check(final && final.status === 'completed', 'final response', final);
    check(final.output?.[0]?.content?.[0]?.text === 'Streamed response.', 'final output', final.output);
  });

  await step('responses, three-turn previous_response_id chain', async () => {
    let prev;
    let last;
    for (const input of ['My name is Ada.', 'I like tea.', 'What is my name, and what do I like?']) {
      const r = await client.responses.create({ model, input, ...(prev ? { previous_response_id: prev } : {}) });
      check(r.status === 'completed', `status of ${JSON.stringify(input)}`, r.status);
      if (prev) check(r.previous_response_id === prev, 'previous_response_id echoed', r.previous_response_id);
      prev = r.id;
      last = r;
    }
    check(last.output_text === 'Your name is Ada and you like tea.', 'third answer', last.output_text);
  });

  await step('typed errors: 400', async () => {
    await expectError('chat without messages', () => client.chat.completions.create({ model, messages: [] }), BadRequestError, 400, 'missing_messages');
    const e = await expectError(
      'messages of the wrong type',
      () => client.chat.completions.create({ model, messages: 'hello' }),
      BadRequestError,
      400,
      'invalid_type',
    );
    check(e.param === 'messages', 'param names the field', e.param);
    await expectError(
      'unknown previous_response_id',
      () => client.responses.create({ model, input: 'x', previous_response_id: 'resp_nope' }),
      BadRequestError,
      400,
      'previous_response_not_found',
    );
  });

  await step('typed errors: 401', async () => {
    const bad = new OpenAI({ baseURL, apiKey: 'wrong-key-0123456789' });
    await expectError('bad key', () => bad.models.list(), AuthenticationError, 401, 'invalid_api_key');
  });

  await step('typed errors: 404', async () => {
    await expectError('unknown response', () => client.responses.retrieve('resp_unknown'), NotFoundError, 404, 'response_not_found');
    await expectError('unknown model (retrieve)', () => client.models.retrieve('no-such-model'), NotFoundError, 404, 'model_not_found');
    await expectError(
      'unknown model (chat)',
      () => client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
      NotFoundError,
      404,
      'model_not_found',
    );
    await client.responses.delete(firstResponse);
    await expectError('deleted response', () => client.responses.retrieve(firstResponse), NotFoundError, 404, 'response_not_found');
  });

  await step('typed errors: 429 when every turn slot is held', async () => {
    // Each held stream is its own conversation (a different first message), so they are
    // distinct sessions; create() resolves once the response headers are in, i.e. the turn
    // holds its slot.
    const held = [];
    for (let i = 0; i < heldTurns; i++) {
      held.push(
        await client.chat.completions.create({
          model,
          messages: [{ role: 'user', content: `Node: held turn ${i}` }],
          stream: true,
        }),
      );
    }
    const e = await expectError(
      'one turn too many',
      () =>
        client.chat.completions.create(
          { model, messages: [{ role: 'user', content: 'Node: one too many' }] },
          { maxRetries: 0 },
        ),
      RateLimitError,
      429,
      'rate_limit_exceeded',
    );
    check(e.headers?.get('retry-after'), 'Retry-After on the 429', Object.fromEntries(e.headers ?? []));
    console.log('HOLDING');
    const texts = await Promise.all(held.map(async (s) => (await collect(s)).text));
    check(texts.every((t) => t === 'released'), 'held streams end with their answer', texts);
  });

  // The SDK's stream helpers validate the sequence (role once, finish_reason, the
  // response.* order) and build the final object; raw iteration does not.
  await step('chat .stream() helper and finalChatCompletion()', async () => {
    const s = client.chat.completions.stream({ model, messages: [{ role: 'user', content: 'Node: helper question' }] });
    const final = await s.finalChatCompletion();
    check(final.choices[0].message.content === 'Helper answer.', 'final content', final.choices[0].message);
    check(final.choices[0].finish_reason === 'stop', 'final finish_reason', final.choices[0].finish_reason);
  });

  // A default stream over a turn that runs a tool: chunks only, which the helper validates.
  await step('chat .stream() helper over a turn with tool progress', async () => {
    const s = client.chat.completions.stream({ model, messages: [{ role: 'user', content: 'Node: helper reads my notes' }] });
    const final = await s.finalChatCompletion();
    check(final.choices[0].message.content === `Helper read: ${notes}`, 'final content after the tool', final.choices[0].message);
    check(final.choices[0].finish_reason === 'stop', 'final finish_reason', final.choices[0].finish_reason);
  });

  await step('responses.stream() helper and finalResponse()', async () => {
    const s = client.responses.stream({ model, input: 'Node: helper response' });
    const final = await s.finalResponse();
    check(final.status === 'completed' && final.output_text === 'Helper response.', 'final response', final);
  });

  await step('responses with store:false are neither retrievable nor chainable', async () => {
    const r = await client.responses.create({ model, input: 'Node: do not keep this', store: false });
    check(r.status === 'completed' && r.store === false && r.output_text === 'Not stored.', 'response', r);
    await expectError('retrieve', () => client.responses.retrieve(r.id), NotFoundError, 404, 'response_not_found');
    await expectError(
      'previous_response_id',
      () => client.responses.create({ model, input: 'x', previous_response_id: r.id }),
      BadRequestError,
      400,
      'previous_response_not_found',
    );
  });

  await step('a turn that fails after the stream began: in-band error', async () => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Node: this turn fails' }],
      stream: true,
    });
    try {
      await collect(stream);
    } catch (e) {
      check(e instanceof APIError, 'an APIError', `${e?.constructor?.name}: ${e?.message}`);
      check(e.status === undefined, 'no HTTP status (the 200 was already sent)', e.status);
      check(e.code === 'agent_error' && e.type === 'server_error', 'code and type from the in-band envelope', { code: e.code, type: e.type });
      check(e.message.includes('the model refused'), 'the model failure in the message', e.message);
      return;
    }
    throw new Failure('the stream ended without raising the in-band error');
  });
}

try {
  await main();
  console.log('ALL OK');
} catch (e) {
  console.error(`FAIL ${current}: ${e instanceof Failure ? e.message : e?.stack ?? e}`);
  process.exit(1);
}
