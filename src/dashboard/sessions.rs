//! Browser sessions: the random id a sign-in sets as a cookie, the role it
//! grants and its CSRF token, kept in this process (a restart signs every
//! browser out), bounded in number and in age.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::access::Role;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "mcp_tasks_dashboard";

/// How long a session lasts from its sign-in.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// The most sessions kept; the oldest goes first.
const MAX_SESSIONS: usize = 4096;

/// One signed-in browser.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) role: Role,
    /// Sent back in every form; a `POST` without it is refused.
    pub(crate) csrf: String,
    started: Instant,
}

/// Every live session, by id.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// A new session for `role`: its id (the cookie's value), or `None` if
    /// the system's random source failed.
    pub(crate) fn start(&self, role: Role) -> Option<String> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, s| s.started.elapsed() < SESSION_TTL);
        if map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| s.started)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        let session = Session {
            role,
            csrf,
            started: Instant::now(),
        };
        map.insert(id.clone(), session);
        Some(id)
    }

    /// The live session `id`, if any.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(id) {
            Some(s) if s.started.elapsed() < SESSION_TTL => Some(s.clone()),
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    /// End session `id`.
    pub(crate) fn end(&self, id: &str) {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(id);
    }
}

/// 32 random bytes as 64 lowercase hex digits.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    let mut text = String::with_capacity(64);
    crate::hex::push_hex(&mut text, &bytes);
    Some(text)
}

/// The session cookie's value among the request's `Cookie` headers.
pub(crate) fn cookie_value(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// The `Set-Cookie` value of session `id` on `path`; `None` for the id
/// clears the cookie.
pub(crate) fn set_cookie(id: Option<&str>, path: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match id {
        Some(id) => format!(
            "{COOKIE}={id}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            SESSION_TTL.as_secs()
        ),
        None => format!("{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_start_read_and_end() {
        let sessions = Sessions::default();
        let id = sessions.start(Role::ReadOnly).unwrap();
        assert_eq!(id.len(), 64);
        let s = sessions.get(&id).unwrap();
        assert_eq!(s.role, Role::ReadOnly);
        assert_ne!(s.csrf, id);
        sessions.end(&id);
        assert!(sessions.get(&id).is_none());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = http::HeaderMap::new();
        h.append("cookie", "a=1; mcp_tasks_dashboardx=2".parse().unwrap());
        h.append("cookie", "b=3; mcp_tasks_dashboard=abc".parse().unwrap());
        assert_eq!(cookie_value(&h), Some("abc"));
        assert!(set_cookie(Some("abc"), "/ops", false).contains("HttpOnly; SameSite=Strict"));
    }
}
