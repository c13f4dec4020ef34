//! Browser sessions, signed rather than stored: a sign-in sets a cookie
//! that names its role, its end and a random nonce, with an HMAC-SHA-256
//! of them under a key derived from that role's token alone; its CSRF
//! token is an HMAC of the nonce. Any process with the same token accepts
//! it, so a fleet of dashboards behind a load balancer (or one restarted)
//! keeps its browsers signed in; a new token signs its role's browsers
//! out. A read-only token's holder can sign no full session: that key is
//! the full token's.
//! Signing out clears the cookie and ends the session on the process that
//! saw it, until the session would have ended anyway (bounded in number:
//! past the bound, every session ending no later than the one forgotten
//! ends with it, so a signed-out session never comes back).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::access::{Access, Role};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "mcp_tasks_dashboard";

/// How long a session lasts from its sign-in.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// The most signed-out sessions remembered; the one ending first goes
/// first, and every session ending no later with it.
const MAX_ENDED: usize = 4096;

/// One signed-in browser.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) role: Role,
    /// Sent back in every form; a `POST` without it is refused.
    pub(crate) csrf: String,
}

/// A live session's cookie, read.
struct Signed<'v> {
    role: Role,
    /// Its end (Unix seconds).
    ends: u64,
    nonce: &'v str,
}

/// The signing keys (one a role that has a token) and the sessions signed
/// out here.
pub(crate) struct Sessions {
    full: Option<[u8; 32]>,
    read_only: Option<[u8; 32]>,
    ended: Mutex<Ended>,
}

/// The sessions signed out here.
#[derive(Default)]
struct Ended {
    /// Nonce → the end of its session (Unix seconds).
    by_nonce: HashMap<String, u64>,
    /// Every session ending at or before this (Unix seconds) is over: the
    /// end of the latest signed-out session forgotten for room.
    through: u64,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// The sessions of a dashboard with `access`'s tokens.
    pub(crate) fn new(access: &Access) -> Self {
        Sessions {
            full: access.session_key(Role::Full),
            read_only: access.session_key(Role::ReadOnly),
            ended: Mutex::default(),
        }
    }

    /// A new session for `role`: the cookie's value, or `None` if the
    /// role has no token or the system's random source failed.
    pub(crate) fn start(&self, role: Role) -> Option<String> {
        self.start_at(role, now_secs())
    }

    fn start_at(&self, role: Role, now: u64) -> Option<String> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).ok()?;
        let mut value = format!("{}.{}.", role_char(role), now + SESSION_TTL.as_secs());
        crate::hex::push_hex(&mut value, &nonce);
        let mac = self
            .mac(role, b"session", value.as_bytes())?
            .finalize()
            .into_bytes();
        value.push('.');
        crate::hex::push_hex(&mut value, &mac);
        Some(value)
    }

    /// The session a cookie's value names, if it is signed with this
    /// dashboard's key, has not ended and was not signed out here.
    pub(crate) fn get(&self, value: &str) -> Option<Session> {
        self.get_at(value, now_secs())
    }

    /// Whether a cookie's value names a live session ([`get`](Self::get)
    /// without making its CSRF token).
    pub(crate) fn is_live(&self, value: &str) -> bool {
        self.live(value, now_secs()).is_some()
    }

    fn get_at(&self, value: &str, now: u64) -> Option<Session> {
        let live = self.live(value, now)?;
        let mut csrf = String::with_capacity(64);
        let tag = self
            .mac(live.role, b"csrf", live.nonce.as_bytes())?
            .finalize()
            .into_bytes();
        crate::hex::push_hex(&mut csrf, &tag);
        Some(Session {
            role: live.role,
            csrf,
        })
    }

    /// What a cookie's value says, if this dashboard's key signed it, its
    /// session has not ended and it was not signed out here.
    fn live<'v>(&self, value: &'v str, now: u64) -> Option<Signed<'v>> {
        let (signed, mac) = value.rsplit_once('.')?;
        let mac = crate::hex::decode_hex(mac)?;
        let mut parts = signed.split('.');
        let role = match parts.next()? {
            "f" => Role::Full,
            "r" => Role::ReadOnly,
            _ => return None,
        };
        self.mac(role, b"session", signed.as_bytes())?
            .verify_slice(&mac)
            .ok()?;
        let ends: u64 = parts.next()?.parse().ok()?;
        let nonce = parts.next()?;
        if now >= ends || parts.next().is_some() || self.was_ended(nonce, ends) {
            return None;
        }
        Some(Signed { role, ends, nonce })
    }

    /// End the session a cookie's value names, on this process.
    pub(crate) fn end(&self, value: &str) {
        let now = now_secs();
        let Some(live) = self.live(value, now) else {
            return;
        };
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        ended.by_nonce.retain(|_, end| *end > now);
        if ended.by_nonce.len() >= MAX_ENDED {
            let first = ended
                .by_nonce
                .iter()
                .min_by_key(|(_, end)| **end)
                .map(|(n, end)| (n.clone(), *end));
            if let Some((first, end)) = first {
                ended.by_nonce.remove(&first);
                // Forgotten, yet still over: with every session ending no
                // later (their holders sign in again).
                ended.through = ended.through.max(end);
            }
        }
        ended.by_nonce.insert(live.nonce.to_owned(), live.ends);
    }

    fn was_ended(&self, nonce: &str, ends: u64) -> bool {
        let ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        ends <= ended.through || ended.by_nonce.contains_key(nonce)
    }

    /// The MAC of `data` for `purpose` (the two never sign each other's)
    /// under `role`'s key; `None` if the role has no token.
    fn mac(&self, role: Role, purpose: &[u8], data: &[u8]) -> Option<Hmac<Sha256>> {
        let key = match role {
            Role::Full => self.full.as_ref(),
            Role::ReadOnly => self.read_only.as_ref(),
        }?;
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(purpose);
        mac.update(&[0]);
        mac.update(data);
        Some(mac)
    }
}

fn role_char(role: Role) -> char {
    match role {
        Role::Full => 'f',
        Role::ReadOnly => 'r',
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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

/// The `Set-Cookie` value of session `value` on `path`; `None` clears the
/// cookie.
pub(crate) fn set_cookie(value: Option<&str>, path: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match value {
        Some(value) => format!(
            "{COOKIE}={value}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            SESSION_TTL.as_secs()
        ),
        None => format!("{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(full: &str) -> Access {
        Access::new()
            .with_full_token(full)
            .unwrap()
            .with_read_only_token("read-only-token-0123")
            .unwrap()
    }

    #[test]
    fn sessions_start_read_and_end() {
        let sessions = Sessions::new(&access("full-token-0123456789"));
        let value = sessions.start(Role::ReadOnly).unwrap();
        let s = sessions.get(&value).unwrap();
        assert_eq!(s.role, Role::ReadOnly);
        assert_eq!(s.csrf.len(), 64);
        assert!(
            !value.contains(&s.csrf),
            "the CSRF token is not in the cookie"
        );
        sessions.end(&value);
        assert!(sessions.get(&value).is_none());
    }

    /// A session signed out (a stolen cookie, say) stays out when more
    /// sign-outs than are remembered come after it: forgetting it ends
    /// every session ending no later. Before, it was simply forgotten, and
    /// its cookie accepted again. A session ending later is untouched.
    #[test]
    fn a_signed_out_session_never_comes_back_when_many_more_sign_out() {
        let sessions = Sessions::new(&access("full-token-0123456789"));
        let stolen = sessions.start_at(Role::Full, now_secs() - 10).unwrap();
        assert!(sessions.get(&stolen).is_some());
        sessions.end(&stolen);
        for _ in 0..MAX_ENDED {
            let value = sessions.start(Role::ReadOnly).unwrap();
            sessions.end(&value);
        }
        assert!(sessions.get(&stolen).is_none(), "signed out for good");
        let fresh = sessions.start(Role::Full).unwrap();
        assert!(sessions.get(&fresh).is_some());
    }

    /// Another process with the same tokens accepts the cookie and gives it
    /// the same CSRF token; other tokens, a changed role or end, and an
    /// ended session are refused.
    #[test]
    fn cookies_are_signed_for_the_tokens_and_end_on_time() {
        let a = Sessions::new(&access("full-token-0123456789"));
        let b = Sessions::new(&access("full-token-0123456789"));
        let other = Sessions::new(
            &Access::new()
                .with_read_only_token("read-only-token-9876")
                .unwrap(),
        );
        let now = 1_800_000_000;
        let value = a.start_at(Role::ReadOnly, now).unwrap();
        let (on_a, on_b) = (
            a.get_at(&value, now).unwrap(),
            b.get_at(&value, now).unwrap(),
        );
        assert_eq!((on_a.role, &on_a.csrf), (on_b.role, &on_b.csrf));
        assert!(
            other.get_at(&value, now).is_none(),
            "another dashboard's key"
        );
        let forged = format!("f{}", &value[1..]);
        assert!(a.get_at(&forged, now).is_none(), "a role written in");
        let ends = now + SESSION_TTL.as_secs();
        let later = value.replacen(&ends.to_string(), &(ends + 1).to_string(), 1);
        assert!(a.get_at(&later, now).is_none(), "an end written in");
        assert!(a.get_at(&value, ends - 1).is_some());
        assert!(a.get_at(&value, ends).is_none(), "ended");
        for junk in ["", ".", "f.1.2.3", "x.y", &value[..value.len() - 2]] {
            assert!(a.get_at(junk, now).is_none(), "{junk:?}");
        }
    }

    /// A cookie as this module signs one, under `key`.
    fn forge(key: &[u8; 32], role: &str, ends: u64, nonce: &str) -> String {
        let mut value = format!("{role}.{ends}.{nonce}");
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
        mac.update(b"session\0");
        mac.update(value.as_bytes());
        value.push('.');
        crate::hex::push_hex(&mut value, &mac.finalize().into_bytes());
        value
    }

    /// Nothing a read-only token's holder can compute signs a full
    /// session: neither a cookie under the read-only role's key nor one
    /// under the key both tokens made before, which with no full token
    /// set was public but for the read-only token. Before, with only a
    /// read-only token set, such a forged `f` cookie was a full session,
    /// and its holder could cancel tasks.
    #[test]
    fn a_read_only_token_signs_no_full_session() {
        use sha2::Digest;
        let ro = "read-only-token-0123";
        let ro_access = Access::new().with_read_only_token(ro).unwrap();
        let only_ro = Sessions::new(&ro_access);
        let both = Sessions::new(&access("full-token-0123456789"));
        let now = 1_800_000_000;
        let ro_key = ro_access.session_key(Role::ReadOnly).unwrap();
        let mut old = sha2::Sha256::new();
        old.update(b"mcp-tasks dashboard sessions v1");
        old.update(0u64.to_be_bytes());
        old.update((ro.len() as u64).to_be_bytes());
        old.update(ro.as_bytes());
        let old_key: [u8; 32] = old.finalize().into();

        let as_read_only = forge(&ro_key, "r", now + 60, "00ff");
        let s = only_ro
            .get_at(&as_read_only, now)
            .expect("forged as signed");
        assert_eq!(s.role, Role::ReadOnly, "what the token gives anyway");
        for key in [ro_key, old_key] {
            let forged = forge(&key, "f", now + 60, "00ff");
            assert!(only_ro.get_at(&forged, now).is_none(), "{forged}");
            assert!(both.get_at(&forged, now).is_none(), "{forged}");
        }
        assert!(
            only_ro.start_at(Role::Full, now).is_none(),
            "no full token, no full session"
        );
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
