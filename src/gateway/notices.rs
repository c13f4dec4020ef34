//! The upstream's notifications that belong to no call (a list changed, a
//! subscribed resource changed, a log message), fanned out to the clients
//! that asked for them: each 2026-07-28 `subscriptions/listen` stream, and
//! the one client of a stdio gateway in the 2025-11-25 era (the only one
//! that hears log messages: the 2026-07-28 wire sends them on the stream of
//! the request they belong to, and on no listen stream).

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

/// Notices buffered for a slow listener before it misses some (then it is
/// told every kind it listens to may have changed).
const BACKLOG: usize = 256;

/// `notifications/tools/list_changed`.
pub(crate) const TOOLS_CHANGED: &str = "notifications/tools/list_changed";
/// `notifications/prompts/list_changed`.
pub(crate) const PROMPTS_CHANGED: &str = "notifications/prompts/list_changed";
/// `notifications/resources/list_changed`.
pub(crate) const RESOURCES_CHANGED: &str = "notifications/resources/list_changed";
/// `notifications/resources/updated`.
pub(crate) const RESOURCE_UPDATED: &str = "notifications/resources/updated";
/// `notifications/message`: a log message.
pub(crate) const LOG_MESSAGE: &str = "notifications/message";

/// One notification of the upstream's.
#[derive(Debug)]
pub(crate) struct Notice {
    pub(crate) method: &'static str,
    /// The resource of a `resources/updated`.
    pub(crate) uri: Option<String>,
    pub(crate) params: Value,
}

/// The fan-out. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Notices {
    tx: broadcast::Sender<Arc<Notice>>,
}

impl Default for Notices {
    fn default() -> Self {
        Notices {
            tx: broadcast::Sender::new(BACKLOG),
        }
    }
}

impl Notices {
    /// Hand on `method` from the upstream if it is one a client can listen
    /// to; `false` if it is not (it is dropped).
    pub(crate) fn publish(&self, method: &str, params: Value) -> bool {
        let method = match method {
            TOOLS_CHANGED => TOOLS_CHANGED,
            PROMPTS_CHANGED => PROMPTS_CHANGED,
            RESOURCES_CHANGED => RESOURCES_CHANGED,
            RESOURCE_UPDATED => RESOURCE_UPDATED,
            LOG_MESSAGE => LOG_MESSAGE,
            _ => return false,
        };
        let uri = (method == RESOURCE_UPDATED)
            .then(|| params.get("uri").and_then(Value::as_str).map(str::to_owned))
            .flatten();
        if method == RESOURCE_UPDATED && uri.is_none() {
            return false;
        }
        // No listener is no error.
        let _ = self.tx.send(Arc::new(Notice {
            method,
            uri,
            params,
        }));
        true
    }

    /// A receiver of every notice from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Notice>> {
        self.tx.subscribe()
    }
}

/// What one listener agreed to receive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    pub(crate) tools: bool,
    pub(crate) prompts: bool,
    pub(crate) resources: bool,
    pub(crate) uris: HashSet<String>,
    /// Log messages that belong to no call (never replayed to a listener
    /// that missed some).
    pub(crate) logs: bool,
}

impl Filter {
    /// Every list change and log message, and the resources in `uris`.
    pub(crate) fn everything(uris: HashSet<String>) -> Self {
        Filter {
            tools: true,
            prompts: true,
            resources: true,
            uris,
            logs: true,
        }
    }

    /// Whether `notice` is one of these.
    pub(crate) fn wants(&self, notice: &Notice) -> bool {
        match notice.method {
            TOOLS_CHANGED => self.tools,
            PROMPTS_CHANGED => self.prompts,
            RESOURCES_CHANGED => self.resources,
            LOG_MESSAGE => self.logs,
            _ => notice.uri.as_ref().is_some_and(|u| self.uris.contains(u)),
        }
    }

    /// What a listener that missed notices is told: each kind it listens
    /// to may have changed.
    pub(crate) fn catch_up(&self) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        for (on, method) in [
            (self.tools, TOOLS_CHANGED),
            (self.prompts, PROMPTS_CHANGED),
            (self.resources, RESOURCES_CHANGED),
        ] {
            if on {
                out.push((method, json!({})));
            }
        }
        let mut uris: Vec<&String> = self.uris.iter().collect();
        uris.sort();
        out.extend(
            uris.into_iter()
                .map(|uri| (RESOURCE_UPDATED, json!({ "uri": uri }))),
        );
        out
    }

    /// The filter as the 2026-07-28 acknowledgement reports it.
    pub(crate) fn to_wire(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (on, key) in [
            (self.tools, "toolsListChanged"),
            (self.prompts, "promptsListChanged"),
            (self.resources, "resourcesListChanged"),
        ] {
            if on {
                out.insert(key.to_owned(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            let mut uris: Vec<&String> = self.uris.iter().collect();
            uris.sort();
            out.insert("resourceSubscriptions".to_owned(), json!(uris));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_gets_what_it_asked_for_and_nothing_else() {
        let notices = Notices::default();
        let mut rx = notices.subscribe();
        assert!(notices.publish(TOOLS_CHANGED, json!({})));
        assert!(notices.publish(RESOURCE_UPDATED, json!({ "uri": "file:///a" })));
        assert!(notices.publish(RESOURCE_UPDATED, json!({ "uri": "file:///b" })));
        assert!(!notices.publish(RESOURCE_UPDATED, json!({})), "no uri");
        assert!(notices.publish(LOG_MESSAGE, json!({ "level": "info", "data": "x" })));
        assert!(!notices.publish("notifications/other", json!({})));
        let filter = Filter {
            tools: false,
            uris: ["file:///b".to_owned()].into(),
            ..Filter::default()
        };
        let mut got = Vec::new();
        while let Ok(n) = rx.try_recv() {
            if filter.wants(&n) {
                got.push(n.params.clone());
            }
        }
        assert_eq!(got, [json!({ "uri": "file:///b" })]);
        assert_eq!(
            filter.to_wire(),
            json!({ "resourceSubscriptions": ["file:///b"] })
        );
    }
}
