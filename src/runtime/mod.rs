//! The engine under [`TaskService`](crate::TaskService): one [`Engine`]
//! per layer, shared by every service the layer makes.
//!
//! Two seams cut it. Below, a pure state machine ([`transition`], with the
//! meaning of a handler's answer in [`answer`]) and the wire writers
//! ([`wire`]): functions of a [`TaskRecord`] with no I/O. Above it, the
//! engine's rooms: the compare-and-set every writer goes through ([`cas`]),
//! the tasks this replica runs ([`registry`]), events and the change feed
//! ([`hub`]), leases ([`lease`]), the runner that drives handlers
//! ([`runner`]), resuming a task ([`resume`]) and the background work
//! ([`reaper`]). On top, one file per MCP method ([`handlers`]).

mod answer;
mod cas;
mod detach;
mod drain;
mod engine;
mod errors;
pub(crate) mod handlers;
mod hold;
mod hub;
pub(crate) mod ids;
mod invoker;
mod lease;
mod listeners;
#[cfg(test)]
mod model_check;
mod operator;
mod publish;
mod queue;
mod ready;
mod reaper;
mod registry;
mod resume;
mod runner;
mod running;
mod slot;
mod status;
mod transition;
mod watchers;
mod wire;
mod won;
mod worker;

pub use drain::DrainReport;
pub(crate) use engine::Engine;
pub use hub::TaskEvent;
pub use operator::{CancelOutcome, Operator};
pub use status::{TaskHandle, MAX_STATUS_MESSAGE_BYTES};
pub use worker::TaskWorker;
