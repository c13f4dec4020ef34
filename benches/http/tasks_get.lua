-- wrk script: POST one 2026-07-28 `tasks/get` of the task in $TASK_ID, with
-- the headers the Streamable HTTP endpoint checks. Used by benches/http.sh.
local id = assert(os.getenv("TASK_ID"), "set TASK_ID")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tasks/get"
wrk.headers["Mcp-Name"] = id
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"' .. id
  .. '","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}'
