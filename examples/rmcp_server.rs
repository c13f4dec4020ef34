//! The demo server of `examples/server.rs`, written as an ordinary rmcp
//! server (the official Rust MCP SDK) and given durable tasks by wrapping it
//! in [`RmcpService`] and `TaskLayer`.
//!
//! ```text
//! cargo run --release --features rmcp,axum --example rmcp_server -- --port 3001
//! ```
//!
//! Same command line, output and tools as `examples/server.rs` (see there:
//! `--stdio` with `--features rmcp,axum,stdio`, `--store`, `--lease-ttl`,
//! `--recovery`, `--seal-key-file`, `Authorization: Bearer` as the owner,
//! the `listening on http://127.0.0.1:PORT/mcp` line). Nothing below knows
//! about tasks or JSON-RPC: the tools are rmcp `#[tool]`s that answer with
//! rmcp's types, ask for input with rmcp's `InputRequiredResult`, read the
//! answers with rmcp's `InputResponses` extractor and stop when rmcp's
//! `CancellationToken` fires; the layer turns them into tasks by the
//! policies in `examples/support/mod.rs`.

use std::borrow::Cow;
use std::time::Duration;

use mcp_task_layer::{RmcpService, TaskHandle};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{InputResponses, ToolCallContext};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    DiscoverResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, Extensions, Implementation, InputRequest, InputRequests,
    InputRequiredResult, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

mod support;

#[tokio::main]
async fn main() {
    support::run("rmcp_server", RmcpService::new(Fixtures::new())).await;
}

// ----- the rmcp server: no task logic below this line -----

/// The conformance fixtures as rmcp tools.
#[derive(Clone)]
struct Fixtures {
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct GreetArgs {
    /// Any JSON, so that a name that is not a string is the tool's error
    /// ("greet needs a string `name`"), as examples/server.rs has it, rather
    /// than rmcp's "failed to deserialize parameters".
    #[schemars(with = "Option<String>")]
    name: Option<Value>,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct SlowComputeArgs {
    seconds: Option<f64>,
    label: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ConfirmDeleteArgs {
    filename: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ProgressJobArgs {
    steps: Option<u64>,
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A form elicitation asking for one property.
fn ask(message: impl Into<String>, schema: ElicitationSchema) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.into(),
            requested_schema: schema,
        },
    ))
}

fn ask_bool(message: impl Into<String>, property: &str) -> InputRequest {
    ask(
        message,
        ElicitationSchema::builder()
            .required_bool(property)
            .build_unchecked(),
    )
}

fn ask_string(message: impl Into<String>, property: &str) -> InputRequest {
    ask(
        message,
        ElicitationSchema::builder()
            .required_string(property)
            .build_unchecked(),
    )
}

/// What the client answered under `key`, if it answered.
enum Answer {
    Missing,
    Accepted(Map<String, Value>),
    Refused,
}

fn answer(answers: Option<&rmcp::model::InputResponses>, key: &str) -> Answer {
    let Some(response) = answers.and_then(|a| a.get(key)) else {
        return Answer::Missing;
    };
    match serde_json::from_value::<ElicitResult>(response.clone()) {
        Ok(ElicitResult {
            action: ElicitationAction::Accept,
            content: Some(Value::Object(content)),
            ..
        }) => Answer::Accepted(content),
        _ => Answer::Refused,
    }
}

/// Sleep, unless the call is cancelled first.
async fn work(duration: Duration, cancel: &CancellationToken) -> Result<(), ErrorData> {
    tokio::select! {
        () = tokio::time::sleep(duration) => Ok(()),
        () = cancel.cancelled() => Err(ErrorData::internal_error("cancelled", None)),
    }
}

#[tool_router]
impl Fixtures {
    fn new() -> Self {
        Fixtures {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Says hello.")]
    async fn greet(&self, Parameters(args): Parameters<GreetArgs>) -> CallToolResult {
        match args.name.as_ref().and_then(Value::as_str) {
            Some(name) => text(format!("Hello, {name}!")),
            None => tool_error("greet needs a string `name`"),
        }
    }

    #[tool(description = "Sleeps for `seconds`; runs as a task when that takes a while.")]
    async fn slow_compute(
        &self,
        Parameters(args): Parameters<SlowComputeArgs>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let seconds = args.seconds.unwrap_or(0.0);
        let seconds = if seconds.is_finite() {
            seconds.clamp(0.0, 3600.0)
        } else {
            0.0
        };
        work(Duration::from_secs_f64(seconds), &cancel).await?;
        let label = args.label.as_deref().unwrap_or("(no label)");
        Ok(text(format!("computed {label} in {seconds}s")))
    }

    #[tool(description = "Fails with a tool error after a second.")]
    async fn failing_job(&self, cancel: CancellationToken) -> Result<CallToolResult, ErrorData> {
        work(Duration::from_secs(1), &cancel).await?;
        Ok(tool_error("failing_job failed, as it always does"))
    }

    #[tool(description = "Fails with a protocol error.")]
    async fn protocol_error_job(
        &self,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        work(Duration::from_millis(100), &cancel).await?;
        // The same error, to the byte, as examples/server.rs's (whose
        // `JsonRpcError::internal` prefixes "Internal error: ").
        Err(ErrorData::internal_error(
            "Internal error: protocol_error_job hit a (simulated) protocol failure",
            None,
        ))
    }

    #[tool(description = "Asks for confirmation, then deletes a (pretend) file.")]
    async fn confirm_delete(
        &self,
        Parameters(args): Parameters<ConfirmDeleteArgs>,
        InputResponses(answers): InputResponses,
        cancel: CancellationToken,
    ) -> Result<CallToolResponse, ErrorData> {
        let filename = args.filename.as_deref().unwrap_or("(unnamed)");
        // Look the file up first; the task exists by the time we ask.
        work(Duration::from_millis(50), &cancel).await?;
        Ok(match answer(answers.as_ref(), "confirm") {
            Answer::Missing => {
                let mut requests = InputRequests::new();
                let question = format!("Delete {filename}?");
                requests.insert("confirm".into(), ask_bool(question, "confirm"));
                InputRequiredResult::from_input_requests(requests).into()
            }
            Answer::Accepted(c) if c.get("confirm") == Some(&Value::Bool(true)) => {
                text(format!("Deleted {filename}.")).into()
            }
            _ => text(format!("Kept {filename}.")).into(),
        })
    }

    #[tool(description = "Asks two questions at once.")]
    async fn multi_input(
        &self,
        InputResponses(answers): InputResponses,
        cancel: CancellationToken,
    ) -> Result<CallToolResponse, ErrorData> {
        work(Duration::from_millis(50), &cancel).await?;
        let name = answer(answers.as_ref(), "name");
        let confirm = answer(answers.as_ref(), "confirm");
        let mut requests = InputRequests::new();
        if matches!(name, Answer::Missing) {
            requests.insert("name".into(), ask_string("Your name?", "name"));
        }
        if matches!(confirm, Answer::Missing) {
            requests.insert("confirm".into(), ask_bool("Proceed?", "confirm"));
        }
        if !requests.is_empty() {
            return Ok(InputRequiredResult::from_input_requests(requests).into());
        }
        let name = match &name {
            Answer::Accepted(c) => c.get("name").and_then(Value::as_str).unwrap_or("friend"),
            _ => "friend",
        };
        let proceed =
            matches!(&confirm, Answer::Accepted(c) if c.get("confirm") == Some(&Value::Bool(true)));
        Ok(text(format!("Thanks, {name}; proceed: {proceed}.")).into())
    }

    #[tool(description = "Asks for a name, then greets as a task.")]
    async fn test_tool_with_task(
        &self,
        InputResponses(answers): InputResponses,
        cancel: CancellationToken,
    ) -> Result<CallToolResponse, ErrorData> {
        match answer(answers.as_ref(), "user_name") {
            // Ask at once, so the question goes back as a plain MRTR result
            // before any task exists.
            Answer::Missing => {
                let mut requests = InputRequests::new();
                requests.insert("user_name".into(), ask_string("Your name?", "name"));
                Ok(InputRequiredResult::from_input_requests(requests).into())
            }
            Answer::Accepted(c) => {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("friend");
                work(Duration::from_millis(200), &cancel).await?;
                Ok(text(format!("Hello, {name}! Your task is done.")).into())
            }
            Answer::Refused => Ok(text("No name given; nothing to do.").into()),
        }
    }

    #[tool(description = "Works through `steps` steps of 200 ms, saying which one it is on.")]
    async fn progress_job(
        &self,
        Parameters(args): Parameters<ProgressJobArgs>,
        cancel: CancellationToken,
        extensions: Extensions,
    ) -> Result<CallToolResult, ErrorData> {
        let steps = args.steps.unwrap_or(5).clamp(1, 1000);
        // TaskLayer puts the task's handle here on every run of a task.
        let task = extensions.get::<TaskHandle>();
        for k in 1..=steps {
            if let Some(task) = task {
                task.set_status_message(format!("step {k} of {steps}"));
            }
            work(Duration::from_millis(200), &cancel).await?;
        }
        Ok(text(format!("Finished {steps} steps.")))
    }
}

/// The versions examples/server.rs speaks, in its order: the two whose
/// tasks `TaskLayer` serves (rmcp's default is every version it knows).
const SUPPORTED_VERSIONS: [ProtocolVersion; 2] =
    [ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25];

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Fixtures {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&SUPPORTED_VERSIONS)
    }

    /// The same for every caller, so `public` (rmcp's default is `private`).
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let versions = self.supported_protocol_versions().into_owned();
        Ok(DiscoverResult::from_server_info(versions, self.get_info())
            .with_cache_scope(CacheScope::Public))
    }

    /// The router's answer, but an unknown tool is named in the error, in
    /// examples/server.rs's words (the router says "tool not found").
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            let message = format!("Invalid params: unknown tool {:?}", request.name.as_ref());
            return Err(ErrorData::invalid_params(message, None));
        }
        let call = ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "mcp-task-layer-rmcp-demo",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Demo server: rmcp tools that run as durable tasks.")
    }
}
