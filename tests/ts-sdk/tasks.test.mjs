// The official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.2, which
// speaks the 2025-11-25 tasks of `client.experimental.tasks`) against
// examples/server.rs over Streamable HTTP. Each test names the requirements
// of ../../docs/requirements.md it covers.
//
//   node --test                      # starts target/release/examples/server itself
//   MCP_URL=http://127.0.0.1:3001/mcp node --test

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  EmptyResultSchema,
  ErrorCode,
  McpError,
  TaskStatusNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import {
  RELATED_TASK,
  TERMINAL,
  Wire,
  assertAllowedSequence,
  assertTask,
  connect,
  pollUntilTerminal,
  sleep,
  startServer,
  withWire,
} from './harness.mjs';

let server;
const clients = [];

before(async () => {
  server = await startServer();
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await server?.stop();
});

/** A client for a fresh caller identity, closed after the suite. */
async function caller(options) {
  const c = await connect(server.url, `ts-sdk-${randomUUID()}`, options);
  clients.push(c.client);
  return c;
}

/** `tools/call` with `params.task`, as the raw SDK request: returns `{task}`. */
function createTask(client, name, args, task = { ttl: 60_000 }) {
  return client.request(
    { method: 'tools/call', params: { name, arguments: args } },
    CreateTaskResultSchema,
    { task },
  );
}

/** The JSON-RPC error a promise rejects with. */
async function rpcError(promise) {
  const error = await promise.then(
    (value) => assert.fail(`expected a JSON-RPC error, got ${JSON.stringify(value)}`),
    (e) => e,
  );
  assert.ok(error instanceof McpError, `not an McpError: ${error}`);
  return error;
}

/** `promise`, or a failure after `ms` milliseconds. */
async function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Drain `callToolStream`, returning every message it yielded. */
async function drain(stream) {
  const messages = [];
  for await (const message of stream) messages.push(message);
  return messages;
}

describe('2025-11-25 tasks through @modelcontextprotocol/sdk 1.32.2', () => {
  test('R59 R60: initialize advertises tasks; tools/list gives each tool its taskSupport', async () => {
    const { client, wire } = await caller();
    await withWire(wire, async () => {
      const caps = client.getServerCapabilities();
      assert.deepEqual(caps.tasks?.requests?.tools?.call, {}, 'R59 tasks.requests.tools.call');
      assert.deepEqual(caps.tasks?.list, {}, 'R59 tasks.list');
      assert.deepEqual(caps.tasks?.cancel, {}, 'R59 tasks.cancel');

      const { tools } = await client.listTools();
      const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
      for (const [name, value] of Object.entries(support)) {
        assert.ok(['forbidden', 'optional', 'required'].includes(value), `R60 ${name}: ${value}`);
      }
      assert.equal(support.greet, 'forbidden');
      assert.equal(support.slow_compute, 'optional');
      assert.equal(support.confirm_delete, 'required');
      assert.equal(support.failing_job, 'required');

      // A forbidden tool still answers synchronously without a task.
      const hello = await client.callTool({ name: 'greet', arguments: { name: 'SDK' } });
      assert.deepEqual(hello.content, [{ type: 'text', text: 'Hello, SDK!' }]);
    });
  });

  test('R63 R49 R65 R27 R28 R29 R78 R66: a task created with a ttl, polled with getTask to completion', async () => {
    const { client, wire, tasks } = await caller();
    await withWire(wire, async () => {
      const { task } = await createTask(client, 'slow_compute', { seconds: 0.8, label: 'poll' }, { ttl: 60_000 });
      assertTask(assert, task, 'CreateTaskResult.task');
      assert.equal(task.status, 'working', 'R63 a new task is working');
      assert.equal(task.ttl, 60_000, 'R49 the applied ttl');

      // On the wire: {task: {...}}, nothing else.
      const created = Wire.response(await wire.call('tools/call'));
      assert.deepEqual(Object.keys(created.result).filter((k) => k !== '_meta'), ['task'], 'R63 wrapped');

      const seen = await pollUntilTerminal(tasks, task.taskId);
      for (const [i, t] of seen.entries()) assertTask(assert, t, `tasks/get #${i + 1}`);
      const statuses = [task.status, ...seen.map((t) => t.status)];
      assert.equal(statuses[0], 'working', 'R28');
      assertAllowedSequence(assert, statuses);
      assert.equal(statuses.at(-1), 'completed');
      for (const t of seen) {
        assert.equal(t.createdAt, task.createdAt, 'R27 createdAt never changes');
        assert.equal(t.ttl, task.ttl, 'R49 tasks/get reports the applied ttl');
      }
      assert.notEqual(seen.at(-1).lastUpdatedAt, task.createdAt, 'R27 lastUpdatedAt moved with the status');

      // R65: the raw tasks/get result is a flat Task.
      for (const exchange of await wire.calls('tasks/get')) {
        const raw = Wire.response(exchange).result;
        assertTask(assert, raw, 'raw tasks/get');
        assert.ok(!(RELATED_TASK in (raw._meta ?? {})), 'R75 no related-task _meta on tasks/get');
      }

      const result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
      assert.deepEqual(result.content, [{ type: 'text', text: 'computed poll in 0.8s' }]);
      assert.equal(result._meta?.[RELATED_TASK]?.taskId, task.taskId, 'R66 related-task _meta');
    });
  });

  test('R49: a ttl above the server maximum is capped, and the applied value is reported', async () => {
    const { client, wire, tasks } = await caller();
    await withWire(wire, async () => {
      const tenDays = 10 * 24 * 3600 * 1000;
      const { task } = await createTask(client, 'slow_compute', { seconds: 0 }, { ttl: tenDays });
      assert.ok(Number.isInteger(task.ttl) && task.ttl > 0 && task.ttl < tenDays, `applied ttl ${task.ttl}`);
      const got = await tasks.getTask(task.taskId);
      assert.equal(got.ttl, task.ttl);
    });
  });

  test('R63 R28 R29 R66: callToolStream yields taskCreated, taskStatus and the result', async () => {
    const { client, wire, tasks } = await caller();
    await withWire(wire, async () => {
      await client.listTools(); // so the SDK knows slow_compute supports tasks
      const messages = await drain(
        tasks.callToolStream(
          { name: 'slow_compute', arguments: { seconds: 0.6, label: 'stream' } },
          CallToolResultSchema,
          { task: { ttl: 30_000 } },
        ),
      );
      const types = messages.map((m) => m.type);
      assert.equal(types[0], 'taskCreated', types.join(','));
      assert.equal(types.at(-1), 'result', `${types.join(',')}: ${JSON.stringify(messages.at(-1))}`);
      assert.ok(types.includes('taskStatus'), types.join(','));
      const statuses = messages.filter((m) => m.type === 'taskStatus').map((m) => m.task.status);
      assertAllowedSequence(assert, ['working', ...statuses]);
      const taskId = messages[0].task.taskId;
      assert.equal(messages[0].task.status, 'working');
      const result = messages.at(-1).result;
      assert.deepEqual(result.content, [{ type: 'text', text: 'computed stream in 0.6s' }]);
      assert.equal(result._meta?.[RELATED_TASK]?.taskId, taskId, 'R66');
      assert.equal((await wire.call('tools/call')).sent.params.task.ttl, 30_000);
    });
  });

  test('R75 R68 R66 R58: confirm_delete asks for confirmation on the tasks/result stream, and resumes', async () => {
    const asked = [];
    const statusNotes = [];
    const { client, wire, tasks } = await caller({
      onElicit: async (request) => {
        asked.push(request);
        return { action: 'accept', content: { confirm: true } };
      },
    });
    client.setNotificationHandler(TaskStatusNotificationSchema, (n) => statusNotes.push(n.params));
    await withWire(wire, async () => {
      await client.listTools(); // confirm_delete is task-required: callToolStream adds `task` itself
      const messages = await drain(
        tasks.callToolStream({ name: 'confirm_delete', arguments: { filename: 'report.txt' } }),
      );
      const types = messages.map((m) => m.type);
      assert.equal(types[0], 'taskCreated', types.join(','));
      assert.equal(types.at(-1), 'result', `${types.join(',')}: ${JSON.stringify(messages.at(-1))}`);
      const taskId = messages[0].task.taskId;
      assert.ok(
        messages.some((m) => m.type === 'taskStatus' && m.task.status === 'input_required'),
        `the task waited for input: ${types.join(',')}`,
      );

      // One elicitation, tagged with the task, as a real server→client request.
      assert.equal(asked.length, 1, JSON.stringify(asked));
      const [elicit] = asked;
      assert.equal(elicit.method, 'elicitation/create');
      assert.equal(elicit.params.message, 'Delete report.txt?');
      assert.deepEqual(elicit.params.requestedSchema.required, ['confirm']);
      assert.equal(elicit.params._meta?.[RELATED_TASK]?.taskId, taskId, 'R75 related-task _meta');

      const result = messages.at(-1).result;
      assert.deepEqual(result.content, [{ type: 'text', text: 'Deleted report.txt.' }]);
      assert.equal(result._meta?.[RELATED_TASK]?.taskId, taskId, 'R66');

      // On the wire: the request came on the SSE stream of tasks/result, the
      // answer went back in its own POST (202), and the response ended the stream.
      const resultCall = await wire.call('tasks/result', { taskId });
      assert.equal(resultCall.status, 200);
      assert.match(resultCall.contentType, /^text\/event-stream/);
      const onStream = resultCall.received.find((m) => m.method === 'elicitation/create');
      assert.ok(onStream, 'the elicitation came on the tasks/result stream');
      assert.equal(typeof onStream.id, 'string');
      const answer = wire.exchanges.find((e) => e.sent && e.sent.id === onStream.id && 'result' in e.sent);
      assert.ok(answer, 'the client answered');
      assert.equal(answer.status, 202);
      assert.deepEqual(answer.sent.result, { action: 'accept', content: { confirm: true } });
      assert.equal(Wire.response(resultCall).result.content[0].text, 'Deleted report.txt.');

      // R58: status notifications are plain Tasks without related-task _meta.
      for (const note of resultCall.received.filter((m) => m.method === 'notifications/tasks/status')) {
        assertTask(assert, { ...note.params, _meta: undefined }, 'notifications/tasks/status');
        assert.equal(note.params.taskId, taskId);
        assert.ok(!(RELATED_TASK in (note.params._meta ?? {})), 'R58 no related-task _meta');
      }
      for (const params of statusNotes) assert.equal(params.taskId, taskId);

      const final = await tasks.getTask(taskId);
      assert.equal(final.status, 'completed');
    });
  });

  test('R75 R66: a declined confirmation and two questions at once (multi_input)', async () => {
    const asked = [];
    const { client, wire, tasks } = await caller({
      onElicit: async (request) => {
        asked.push(request);
        if (request.params.message === 'Delete notes.txt?') return { action: 'decline' };
        if (request.params.message === 'Your name?') return { action: 'accept', content: { name: 'Ada' } };
        return { action: 'accept', content: { confirm: true } };
      },
    });
    await withWire(wire, async () => {
      await client.listTools();
      const declined = await drain(
        tasks.callToolStream({ name: 'confirm_delete', arguments: { filename: 'notes.txt' } }),
      );
      assert.equal(declined.at(-1).type, 'result', JSON.stringify(declined.at(-1)));
      assert.deepEqual(declined.at(-1).result.content, [{ type: 'text', text: 'Kept notes.txt.' }]);

      const multi = await drain(tasks.callToolStream({ name: 'multi_input', arguments: {} }));
      assert.equal(multi.at(-1).type, 'result', JSON.stringify(multi.at(-1)));
      assert.deepEqual(multi.at(-1).result.content, [{ type: 'text', text: 'Thanks, Ada; proceed: true.' }]);
      const taskId = multi[0].task.taskId;
      const mine = asked.filter((r) => r.params._meta?.[RELATED_TASK]?.taskId === taskId);
      assert.deepEqual(mine.map((r) => r.params.message).sort(), ['Proceed?', 'Your name?'], 'R75');
    });
  });

  test('R68 R58: tasks/result waits for a working task and reports its status on the way', async () => {
    const { client, wire, tasks } = await caller();
    const notes = [];
    client.setNotificationHandler(TaskStatusNotificationSchema, (n) => notes.push(n.params));
    await withWire(wire, async () => {
      const started = Date.now();
      const { task } = await createTask(client, 'slow_compute', { seconds: 1.2, label: 'wait' });
      const result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
      const waited = Date.now() - started;
      assert.ok(waited >= 1_000, `R68 answered after ${waited} ms, before the task could finish`);
      assert.deepEqual(result.content, [{ type: 'text', text: 'computed wait in 1.2s' }]);
      assert.equal((await tasks.getTask(task.taskId)).status, 'completed');
      // Notifications are best effort; whatever came is a Task of this task.
      for (const params of notes) {
        assert.equal(params.taskId, task.taskId);
        assert.ok(!(RELATED_TASK in (params._meta ?? {})), 'R58');
      }
    });
  });

  test('R69 R67: a tool error fails the task with its isError result; a JSON-RPC error fails it with that error', async () => {
    const { client, wire, tasks } = await caller();
    await withWire(wire, async () => {
      const { task: toolError } = await createTask(client, 'failing_job', {});
      const seen = await pollUntilTerminal(tasks, toolError.taskId);
      assert.equal(seen.at(-1).status, 'failed', 'R69 isError:true makes a failed task');
      const result = await tasks.getTaskResult(toolError.taskId, CallToolResultSchema);
      assert.equal(result.isError, true, 'R69 tasks/result returns the isError result');
      assert.deepEqual(result.content, [{ type: 'text', text: 'failing_job failed, as it always does' }]);
      assert.equal(result._meta?.[RELATED_TASK]?.taskId, toolError.taskId);

      const { task: rpcFailure } = await createTask(client, 'protocol_error_job', {});
      const seen2 = await pollUntilTerminal(tasks, rpcFailure.taskId);
      assert.equal(seen2.at(-1).status, 'failed');
      const error = await rpcError(tasks.getTaskResult(rpcFailure.taskId, CallToolResultSchema));
      assert.equal(error.code, ErrorCode.InternalError, 'R67 the same JSON-RPC error');
      assert.match(error.message, /protocol_error_job hit a \(simulated\) protocol failure/);
      const raw = Wire.response(await wire.call('tasks/result', { taskId: rpcFailure.taskId }));
      assert.deepEqual(raw.error, {
        code: -32603,
        message: 'Internal error: protocol_error_job hit a (simulated) protocol failure',
      });
    });
  });

  test('R73 R74 R52: listTasks pages through all of the caller\'s tasks, newest first, and nobody else\'s', async () => {
    const { client, wire, tasks } = await caller();
    const other = await caller();
    await withWire(wire, async () => {
      // More tasks than the layer's page size (50).
      const count = 60;
      const created = [];
      for (let i = 0; i < count; i += 10) {
        const batch = await Promise.all(
          Array.from({ length: Math.min(10, count - i) }, () => createTask(client, 'slow_compute', { seconds: 0 })),
        );
        created.push(...batch.map((r) => r.task.taskId));
      }
      const pages = [];
      let cursor;
      do {
        const page = await tasks.listTasks(cursor);
        pages.push(page);
        cursor = page.nextCursor;
        assert.ok(pages.length <= count, 'the listing ends');
      } while (cursor !== undefined);
      assert.ok(pages.length >= 2, `R73 ${count} tasks take more than one page (got ${pages.length})`);
      for (const page of pages.slice(0, -1)) {
        assert.ok(page.tasks.length > 0, 'R73 no empty page before the last');
        assert.equal(typeof page.nextCursor, 'string', 'R73 nextCursor while more remain');
      }
      const listed = pages.flatMap((p) => p.tasks);
      for (const t of listed) assertTask(assert, t, 'tasks/list entry');
      const ids = listed.map((t) => t.taskId);
      assert.equal(new Set(ids).size, ids.length, 'no task listed twice');
      assert.deepEqual([...ids].sort(), [...created].sort(), 'R74 exactly the caller\'s tasks');
      for (let i = 1; i < listed.length; i++) {
        assert.ok(
          Date.parse(listed[i - 1].createdAt) >= Date.parse(listed[i].createdAt),
          `newest first: ${listed[i - 1].createdAt} before ${listed[i].createdAt}`,
        );
      }
      for (const exchange of await wire.calls('tasks/list')) {
        const raw = Wire.response(exchange).result;
        assert.ok(!(RELATED_TASK in (raw._meta ?? {})), 'R75 no related-task _meta on tasks/list');
      }

      // R52: another caller sees none of them, not even with this caller's cursor.
      const theirs = await other.tasks.listTasks();
      assert.deepEqual(theirs.tasks, [], 'R52');
      const firstCursor = pages[0].nextCursor;
      const borrowed = await other.tasks.listTasks(firstCursor).then(
        (page) => page.tasks.map((t) => t.taskId),
        (e) => (e instanceof McpError && e.code === ErrorCode.InvalidParams ? [] : Promise.reject(e)),
      );
      assert.deepEqual(borrowed.filter((id) => created.includes(id)), [], 'R52 a cursor does not leak');
      for (const id of created.slice(0, 3)) {
        const error = await rpcError(other.tasks.getTask(id));
        assert.equal(error.code, ErrorCode.InvalidParams, 'R51 another caller\'s task reads as unknown');
      }

      // R73: a malformed cursor is -32602.
      const error = await rpcError(tasks.listTasks('not a cursor'));
      assert.equal(error.code, ErrorCode.InvalidParams, 'R73 bad cursor');
    });
  });

  test('R70 R78 R71 R72 R26: cancelTask cancels a long slow_compute for good', async () => {
    const { client, wire, tasks } = await caller();
    await withWire(wire, async () => {
      const { task } = await createTask(client, 'slow_compute', { seconds: 3600, label: 'forever' });
      assert.equal(task.status, 'working');
      const cancelled = await tasks.cancelTask(task.taskId);
      assertTask(assert, cancelled, 'tasks/cancel result');
      assert.equal(cancelled.status, 'cancelled', 'R70 the returned Task is already cancelled');
      assert.equal(cancelled.taskId, task.taskId);
      assert.equal(cancelled.createdAt, task.createdAt, 'R78');
      const raw = Wire.response(await wire.call('tasks/cancel', { taskId: task.taskId })).result;
      assertTask(assert, raw, 'raw tasks/cancel result');
      assert.ok(!(RELATED_TASK in (raw._meta ?? {})), 'R75 no related-task _meta on tasks/cancel');

      assert.equal((await tasks.getTask(task.taskId)).status, 'cancelled');
      await sleep(500);
      assert.equal((await tasks.getTask(task.taskId)).status, 'cancelled', 'R70 R26 it stays cancelled');

      const again = await rpcError(tasks.cancelTask(task.taskId));
      assert.equal(again.code, ErrorCode.InvalidParams, 'R71 cancelling a terminal task is -32602');

      // tasks/result on a cancelled task is unspecified (Q10); it must not hang.
      await within(5_000, tasks.getTaskResult(task.taskId, CallToolResultSchema).catch((e) => e), 'tasks/result on a cancelled task');

      const unknown = 'ffffffffffffffffffffffffffffffff';
      for (const call of [
        () => tasks.getTask(unknown),
        () => tasks.getTaskResult(unknown, CallToolResultSchema),
        () => tasks.cancelTask(unknown),
      ]) {
        const error = await rpcError(call());
        assert.equal(error.code, ErrorCode.InvalidParams, 'R72 unknown task ids are -32602');
      }
    });
  });

  test('R61 R62 R76: task support mismatches and tasks/update are -32601', async () => {
    const { client, wire } = await caller();
    await withWire(wire, async () => {
      const forbidden = await rpcError(createTask(client, 'greet', { name: 'x' }));
      assert.equal(forbidden.code, ErrorCode.MethodNotFound, 'R61 task on a forbidden tool');

      // client.callTool refuses task-required tools by itself, so send the raw request.
      const required = await rpcError(
        client.request(
          { method: 'tools/call', params: { name: 'confirm_delete', arguments: { filename: 'x' } } },
          CallToolResultSchema,
        ),
      );
      assert.equal(required.code, ErrorCode.MethodNotFound, 'R62 no task on a required tool');

      const update = await rpcError(
        client.request(
          { method: 'tasks/update', params: { taskId: 'x', inputResponses: {} } },
          EmptyResultSchema,
        ),
      );
      assert.equal(update.code, ErrorCode.MethodNotFound, 'R76 tasks/update does not exist in 2025-11-25');
    });
  });
});
