// Shared helpers for the TypeScript SDK tests: the server under test, a
// client per caller, and a log of every HTTP exchange so a failure shows the
// exact JSON that went over the wire.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The server under test: `MCP_URL` if set, otherwise `examples/server.rs`
 * built in release mode (`SERVER_BIN`, or target/release/examples/server
 * under `CARGO_TARGET_DIR`), started on a free port and stopped by `stop()`.
 */
export async function startServer() {
  if (process.env.MCP_URL) {
    return { url: new URL(process.env.MCP_URL), stop: async () => {} };
  }
  const target = process.env.CARGO_TARGET_DIR
    ? path.resolve(ROOT, process.env.CARGO_TARGET_DIR)
    : path.join(ROOT, 'target');
  const bin = process.env.SERVER_BIN ?? path.join(target, 'release', 'examples', 'server');
  if (!existsSync(bin)) {
    throw new Error(
      `no server at ${bin}: run \`cargo build --release --features axum,stdio --example server\`, ` +
        'or set MCP_URL or SERVER_BIN',
    );
  }
  const child = spawn(bin, ['--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no "listening on" line within 30 s: ${out}`)), 30_000);
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}: ${out}`)));
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = /^listening on (http:\/\/127\.0\.0\.1:\d+\/mcp)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(new URL(m[1]));
      }
    });
  });
  return {
    url,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(5_000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Parse the `message` events of an SSE body into JSON-RPC messages. */
function sseMessages(text) {
  const messages = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data) messages.push(JSON.parse(data));
  }
  return messages;
}

/**
 * A `fetch` that records each exchange: the method, the JSON body sent, the
 * status, the content type, and every JSON-RPC message received (an
 * `application/json` body, or each event of a `text/event-stream`).
 */
export class Wire {
  constructor() {
    this.exchanges = [];
    this.fetch = this.fetch.bind(this);
  }

  async fetch(url, init = {}) {
    const entry = {
      method: init.method ?? 'GET',
      sent: typeof init.body === 'string' ? JSON.parse(init.body) : undefined,
      status: undefined,
      contentType: undefined,
      received: [],
      raw: '',
      done: Promise.resolve(),
    };
    this.exchanges.push(entry);
    const response = await fetch(url, init);
    entry.status = response.status;
    entry.contentType = response.headers.get('content-type');
    if (!response.body) return response;
    const [mine, theirs] = response.body.tee();
    entry.done = new Response(mine)
      .text()
      .then((text) => {
        entry.raw = text;
        if (!text) return;
        entry.received = entry.contentType?.startsWith('text/event-stream')
          ? sseMessages(text)
          : [JSON.parse(text)];
      })
      .catch(() => {});
    return new Response(theirs, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  }

  /** The exchanges whose request has this JSON-RPC method, once their bodies are read. */
  async calls(method) {
    const found = this.exchanges.filter((e) => e.sent?.method === method);
    await Promise.all(found.map((e) => e.done));
    return found;
  }

  /** The exchange of the request with this method and these params (matched on `taskId` etc.). */
  async call(method, match = {}) {
    const found = (await this.calls(method)).filter((e) =>
      Object.entries(match).every(([k, v]) => e.sent?.params?.[k] === v),
    );
    if (found.length === 0) throw new Error(`no ${method} ${JSON.stringify(match)} on the wire`);
    return found.at(-1);
  }

  /** The JSON-RPC response to an exchange's request (its last message with the same id). */
  static response(exchange) {
    return exchange.received.filter((m) => m.id === exchange.sent.id && !('method' in m)).at(-1);
  }

  /** Every exchange, as text, for a failure message. */
  async dump() {
    await Promise.all(this.exchanges.map((e) => e.done));
    return this.exchanges
      .map(
        (e) =>
          `${e.method} ${e.sent ? JSON.stringify(e.sent) : ''}\n  -> ${e.status} ${e.contentType ?? ''}` +
          (e.raw ? `\n  ${e.raw.trim().replace(/\n/g, '\n  ')}` : ''),
      )
      .join('\n');
  }
}

/**
 * A connected SDK client for the caller `who` (sent as `Authorization:
 * Bearer who`, so each test sees only its own tasks). It declares form
 * elicitation; `onElicit(request)` answers `elicitation/create`.
 */
export async function connect(url, who, { onElicit } = {}) {
  const wire = new Wire();
  const client = new Client(
    { name: 'mcp-task-layer-ts-sdk-tests', version: '0.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.onerror = (error) => wire.exchanges.push({ method: 'CLIENT ERROR', sent: undefined, status: String(error), received: [], raw: '', done: Promise.resolve() });
  if (onElicit) {
    const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
    client.setRequestHandler(ElicitRequestSchema, onElicit);
  }
  const transport = new StreamableHTTPClientTransport(url, {
    fetch: wire.fetch,
    requestInit: { headers: { Authorization: `Bearer ${who}` } },
  });
  await client.connect(transport);
  return { client, wire, tasks: client.experimental.tasks };
}

/**
 * Run `body`; if it throws, append the wire log to the error, so the report
 * shows what the server actually sent.
 */
export async function withWire(wire, body) {
  try {
    return await body();
  } catch (error) {
    const log = await wire.dump();
    error.message = `${error.message}\n--- wire ---\n${log}`;
    throw error;
  }
}

/** Poll `tasks/get` until the task is terminal; every observed Task, in order. */
export async function pollUntilTerminal(tasks, taskId, { timeoutMs = 30_000, intervalMs } = {}) {
  const seen = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const task = await tasks.getTask(taskId);
    seen.push(task);
    if (['completed', 'failed', 'cancelled'].includes(task.status)) return seen;
    if (Date.now() > deadline) throw new Error(`task ${taskId} still ${task.status} after ${timeoutMs} ms`);
    await sleep(intervalMs ?? task.pollInterval ?? 250);
  }
}

export const TERMINAL = ['completed', 'failed', 'cancelled'];

/** The status edges 2025-11-25 allows (T25: working/input_required to anything; terminal is final). */
export function assertAllowedSequence(assert, statuses) {
  const allowed = {
    working: ['working', 'input_required', ...TERMINAL],
    input_required: ['input_required', 'working', ...TERMINAL],
  };
  for (let i = 1; i < statuses.length; i++) {
    const [from, to] = [statuses[i - 1], statuses[i]];
    if (TERMINAL.includes(from)) {
      assert.equal(to, from, `a terminal status never changes: ${statuses.join(' -> ')}`);
    } else {
      assert.ok(allowed[from]?.includes(to), `${from} -> ${to} is not allowed: ${statuses.join(' -> ')}`);
    }
  }
}

/** A Task as 2025-11-25 defines it (S25 Task), with RFC 3339 timestamps. */
export function assertTask(assert, task, where = 'task') {
  assert.equal(typeof task.taskId, 'string', `${where}: taskId`);
  assert.ok(['working', 'input_required', ...TERMINAL].includes(task.status), `${where}: status ${task.status}`);
  assert.equal(typeof task.createdAt, 'string', `${where}: createdAt`);
  assert.equal(typeof task.lastUpdatedAt, 'string', `${where}: lastUpdatedAt`);
  assert.ok(!Number.isNaN(Date.parse(task.createdAt)), `${where}: createdAt ${task.createdAt}`);
  assert.ok(!Number.isNaN(Date.parse(task.lastUpdatedAt)), `${where}: lastUpdatedAt ${task.lastUpdatedAt}`);
  assert.ok(Date.parse(task.lastUpdatedAt) >= Date.parse(task.createdAt), `${where}: lastUpdatedAt >= createdAt`);
  assert.ok('ttl' in task, `${where}: ttl is present`);
  assert.ok(task.ttl === null || Number.isInteger(task.ttl), `${where}: ttl ${task.ttl}`);
  if ('pollInterval' in task) assert.ok(Number.isInteger(task.pollInterval), `${where}: pollInterval`);
  for (const key of ['task', 'result', 'error', 'inputRequests']) {
    assert.ok(!(key in task), `${where}: no ${key} in a legacy Task: ${JSON.stringify(task)}`);
  }
}

export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/**
 * The `--stdio` server binary: `SERVER_BIN`, or target/release/examples/server
 * under `CARGO_TARGET_DIR` (built with `--features axum,stdio`).
 */
export function serverBinary() {
  const target = process.env.CARGO_TARGET_DIR
    ? path.resolve(ROOT, process.env.CARGO_TARGET_DIR)
    : path.join(ROOT, 'target');
  const bin = process.env.SERVER_BIN ?? path.join(target, 'release', 'examples', 'server');
  if (!existsSync(bin)) {
    throw new Error(
      `no server at ${bin}: run \`cargo build --release --features axum,stdio --example server\`, or set SERVER_BIN`,
    );
  }
  return bin;
}

/** A transport that records every message it carries, in order. */
class TappedTransport {
  constructor(inner, log) {
    this.inner = inner;
    this.log = log;
  }

  async start() {
    this.inner.onmessage = (message, extra) => {
      this.log.push({ dir: 'in', message });
      this.onmessage?.(message, extra);
    };
    this.inner.onclose = () => this.onclose?.();
    this.inner.onerror = (error) => this.onerror?.(error);
    return this.inner.start();
  }

  async send(message, options) {
    this.log.push({ dir: 'out', message });
    return this.inner.send(message, options);
  }

  async close() {
    return this.inner.close();
  }
}

/**
 * An SDK client on its own server process, launched by
 * `StdioClientTransport` with `--stdio` (server logs go to this stderr). It
 * declares form elicitation; `onElicit(request)` answers `elicitation/create`.
 * `log` holds every message that crossed the pipes, `{dir: 'in'|'out', message}`.
 */
export async function connectStdio({ onElicit } = {}) {
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const log = [];
  const client = new Client(
    { name: 'mcp-task-layer-ts-sdk-tests', version: '0.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.onerror = (error) => log.push({ dir: 'client error', message: String(error) });
  if (onElicit) {
    const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
    client.setRequestHandler(ElicitRequestSchema, onElicit);
  }
  const transport = new StdioClientTransport({ command: serverBinary(), args: ['--stdio'], stderr: 'inherit' });
  await client.connect(new TappedTransport(transport, log));
  return { client, log, tasks: client.experimental.tasks };
}
