// The official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.2) over
// stdio: `StdioClientTransport` launches examples/server.rs with `--stdio`
// (one process per client, as a desktop host does) and runs the 2025-11-25
// task scenarios of tasks.test.mjs, the confirm_delete elicitation during
// tasks/result included. Each test names the requirements of
// ../../docs/requirements.md it covers.
//
//   SERVER_BIN=../../target/release/examples/server node --test stdio.test.mjs

import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

import { RELATED_TASK, assertAllowedSequence, assertTask, connectStdio, pollUntilTerminal } from './harness.mjs';

const clients = [];

after(async () => {
  await Promise.allSettled(clients.map((c) => c.client.close()));
});

/** A client on its own `--stdio` server process, closed after the suite. */
async function launch(options) {
  const c = await connectStdio(options);
  clients.push(c);
  return c;
}

function createTask(client, name, args, task = { ttl: 60_000 }) {
  return client.request({ method: 'tools/call', params: { name, arguments: args } }, CreateTaskResultSchema, { task });
}

async function rpcError(promise) {
  const error = await promise.then(
    (value) => assert.fail(`expected a JSON-RPC error, got ${JSON.stringify(value)}`),
    (e) => e,
  );
  assert.ok(error instanceof McpError, `not an McpError: ${error}`);
  return error;
}

/** Run `body`; on failure, append every message that crossed the pipes. */
async function withLog(log, body) {
  try {
    return await body();
  } catch (error) {
    error.message += `\n--- pipes ---\n${log.map((e) => `${e.dir} ${JSON.stringify(e.message)}`).join('\n')}`;
    throw error;
  }
}

describe('2025-11-25 tasks through @modelcontextprotocol/sdk 1.32.2 over stdio', () => {
  test('R59 R60: initialize advertises tasks; tools/list gives each tool its taskSupport', async () => {
    const { client, log } = await launch();
    await withLog(log, async () => {
      assert.deepEqual(client.getServerCapabilities().tasks?.requests?.tools?.call, {}, 'R59');
      const { tools } = await client.listTools();
      const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
      assert.equal(support.confirm_delete, 'required', 'R60');
      assert.equal(support.greet, 'forbidden', 'R60');
    });
  });

  test('R63 R49 R65 R66: a task with a ttl, polled with getTask to completion, then its result', async () => {
    const { client, tasks, log } = await launch();
    await withLog(log, async () => {
      const { task } = await createTask(client, 'slow_compute', { seconds: 0.5, label: 'poll' });
      assertTask(assert, task, 'CreateTaskResult.task');
      assert.equal(task.status, 'working', 'R63');
      assert.equal(task.ttl, 60_000, 'R49');
      const seen = await pollUntilTerminal(tasks, task.taskId);
      for (const [i, t] of seen.entries()) assertTask(assert, t, `tasks/get #${i + 1}`);
      assertAllowedSequence(assert, [task.status, ...seen.map((t) => t.status)]);
      assert.equal(seen.at(-1).status, 'completed');
      const result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
      assert.deepEqual(result.content, [{ type: 'text', text: 'computed poll in 0.5s' }]);
      assert.equal(result._meta?.[RELATED_TASK]?.taskId, task.taskId, 'R66');
    });
  });

  test('R75 R68 R66: confirm_delete asks on the pipes during tasks/result, and resumes', async () => {
    const asked = [];
    const { client, tasks, log } = await launch({
      onElicit: async (request) => {
        asked.push(request);
        return { action: 'accept', content: { confirm: true } };
      },
    });
    await withLog(log, async () => {
      await client.listTools();
      const messages = [];
      for await (const m of tasks.callToolStream({ name: 'confirm_delete', arguments: { filename: 'report.txt' } })) {
        messages.push(m);
      }
      const types = messages.map((m) => m.type);
      assert.equal(types[0], 'taskCreated', types.join(','));
      assert.equal(types.at(-1), 'result', `${types.join(',')}: ${JSON.stringify(messages.at(-1))}`);
      const taskId = messages[0].task.taskId;
      assert.equal(asked.length, 1, JSON.stringify(asked));
      assert.equal(asked[0].params.message, 'Delete report.txt?');
      assert.equal(asked[0].params._meta?.[RELATED_TASK]?.taskId, taskId, 'R75');
      assert.deepEqual(messages.at(-1).result.content, [{ type: 'text', text: 'Deleted report.txt.' }]);
      assert.equal(messages.at(-1).result._meta?.[RELATED_TASK]?.taskId, taskId, 'R66');

      // On the pipes: the request came from the server while tasks/result
      // was open, the answer went back with its id, then tasks/result answered.
      const resultReq = log.find((e) => e.dir === 'out' && e.message.method === 'tasks/result');
      const ask = log.find((e) => e.dir === 'in' && e.message.method === 'elicitation/create');
      const answer = log.find((e) => e.dir === 'out' && e.message.id === ask?.message.id && 'result' in e.message);
      const resultRes = log.find((e) => e.dir === 'in' && e.message.id === resultReq?.message.id && !('method' in e.message));
      assert.ok(resultReq && ask && answer && resultRes, 'every message crossed the pipes');
      assert.ok(log.indexOf(resultReq) < log.indexOf(ask), 'asked while tasks/result was open');
      assert.ok(log.indexOf(answer) < log.indexOf(resultRes), 'answered before the result');
      assert.equal((await tasks.getTask(taskId)).status, 'completed');
    });
  });

  test('R69 R67: a tool error fails the task with its result; a JSON-RPC error with that error', async () => {
    const { client, tasks, log } = await launch();
    await withLog(log, async () => {
      const { task } = await createTask(client, 'failing_job', {});
      const result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
      assert.equal(result.isError, true, 'R69');
      assert.equal((await tasks.getTask(task.taskId)).status, 'failed');
      const { task: rpc } = await createTask(client, 'protocol_error_job', {});
      const error = await rpcError(tasks.getTaskResult(rpc.taskId, CallToolResultSchema));
      assert.equal(error.code, ErrorCode.InternalError, 'R67');
    });
  });

  test('R73 R74: listTasks lists the process owner\'s tasks, newest first', async () => {
    const { client, tasks, log } = await launch();
    await withLog(log, async () => {
      const created = [];
      for (let i = 0; i < 3; i++) created.push((await createTask(client, 'slow_compute', { seconds: 0 })).task.taskId);
      const { tasks: listed } = await tasks.listTasks();
      for (const t of listed) assertTask(assert, t, 'tasks/list entry');
      assert.deepEqual(listed.map((t) => t.taskId).sort(), [...created].sort(), 'R74');
    });
  });

  test('R70 R71 R72: cancelTask cancels a long slow_compute for good', async () => {
    const { client, tasks, log } = await launch();
    await withLog(log, async () => {
      const { task } = await createTask(client, 'slow_compute', { seconds: 3600 });
      const cancelled = await tasks.cancelTask(task.taskId);
      assert.equal(cancelled.status, 'cancelled', 'R70');
      assert.equal((await tasks.getTask(task.taskId)).status, 'cancelled');
      assert.equal((await rpcError(tasks.cancelTask(task.taskId))).code, ErrorCode.InvalidParams, 'R71');
      assert.equal((await rpcError(tasks.getTask('ffffffffffffffffffffffffffffffff'))).code, ErrorCode.InvalidParams, 'R72');
    });
  });
});
