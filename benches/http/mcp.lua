-- wrk script: POST one 2026-07-28 request with the headers the Streamable
-- HTTP endpoint checks, the same to the example server and to the ceiling.
-- Used by benches/http.sh: BODY is the JSON-RPC request, MCP_METHOD and
-- MCP_NAME its `Mcp-Method` and `Mcp-Name` headers.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = assert(os.getenv("MCP_METHOD"), "set MCP_METHOD")
wrk.headers["Mcp-Name"] = assert(os.getenv("MCP_NAME"), "set MCP_NAME")
wrk.body = assert(os.getenv("BODY"), "set BODY")
