//! What the endpoint refuses before it reads a body: a browser page of an
//! origin it does not serve (cross-site requests, DNS rebinding), and a
//! body not declared JSON (which a page can send without a CORS preflight).

#[cfg(feature = "dashboard")]
use axum::http::HeaderMap;
use axum::http::StatusCode;

use super::seen::{readable, One, SeenHeaders};
use crate::jsonrpc::JsonRpcError;

/// The browser origins an endpoint serves; requests without `Origin` are
/// always served.
#[derive(Clone, Debug)]
pub(crate) enum AllowedOrigins {
    /// Pages on loopback: `http` or `https`, host `localhost`, `127.0.0.1`
    /// or `[::1]`, any port.
    Loopback,
    /// Exactly these origins, lower-cased, without a trailing `/`.
    List(Vec<String>),
    /// Every origin.
    Any,
}

impl AllowedOrigins {
    pub(crate) fn list<I, O>(origins: I) -> Self
    where
        I: IntoIterator<Item = O>,
        O: AsRef<str>,
    {
        AllowedOrigins::List(
            origins
                .into_iter()
                .map(|o| {
                    let o = o.as_ref().trim();
                    o.strip_suffix('/').unwrap_or(o).to_ascii_lowercase()
                })
                .collect(),
        )
    }

    fn allows(&self, origin: &str) -> bool {
        match self {
            AllowedOrigins::Loopback => is_loopback(origin),
            AllowedOrigins::List(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
            AllowedOrigins::Any => true,
        }
    }
}

/// Whether `origin` is `scheme://host[:port]` with an `http(s)` scheme and
/// a loopback host: exactly the names that cannot be an attacker's page.
fn is_loopback(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, port)) => (host, port),
            None => return false,
        },
        None => rest.find(':').map_or((rest, ""), |i| rest.split_at(i)),
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = if rest.starts_with('[') {
        host == "::1"
    } else {
        host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1"
    };
    port_ok && host_ok
}

/// The one value of a header, if it has exactly one readable value.
/// `Err(())` when it is repeated or not visible ASCII.
fn single(header: One<'_>) -> Result<Option<&str>, ()> {
    match header {
        One::Absent => Ok(None),
        // Visible ASCII and tabs: `trim_ascii` trims what `trim` would.
        One::Once(value) => value.to_str().map(|v| Some(v.trim_ascii())).map_err(|_| ()),
        One::Repeated => Err(()),
    }
}

/// Whether a request may come from where its `Origin` header says: none
/// at all (not a browser page), or exactly one that `origins` allows. The
/// MCP endpoint's check, and the dashboard's on every `POST`.
#[cfg(feature = "dashboard")]
pub(crate) fn origin_admitted(headers: &HeaderMap, origins: &AllowedOrigins) -> bool {
    origin_ok(SeenHeaders::read(headers).origin, origins)
}

fn origin_ok(origin: One<'_>, origins: &AllowedOrigins) -> bool {
    match single(origin) {
        Ok(None) => true,
        Ok(Some(origin)) => origins.allows(origin),
        Err(()) => false,
    }
}

/// Refuse a request from a page the endpoint does not serve (403), or one
/// whose body is not declared `application/json` (415).
pub(super) fn admit(
    headers: &SeenHeaders<'_>,
    origins: &AllowedOrigins,
) -> Result<(), (StatusCode, JsonRpcError)> {
    if !origin_ok(headers.origin, origins) {
        let error = JsonRpcError::invalid_request("the Origin header is not allowed");
        return Err((StatusCode::FORBIDDEN, error));
    }
    let content_type = match headers.content_type {
        // The common value, exactly: readable and JSON (the test below
        // passes it too), without a look at its bytes one by one.
        One::Once(value) if value.as_bytes() == b"application/json" => return Ok(()),
        // Its bytes, if readable: what `single` would give, not made a `&str`.
        One::Once(value) if readable(value.as_bytes()) => Some(value.as_bytes()),
        _ => None,
    };
    if !content_type.is_some_and(is_json) {
        let error = JsonRpcError::invalid_request("the Content-Type must be application/json");
        return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, error));
    }
    Ok(())
}

/// `application/json`, with any parameters (`charset=utf-8`, ...).
fn is_json(content_type: &[u8]) -> bool {
    // A readable header value is visible ASCII (and tabs): its whitespace
    // is ASCII whitespace.
    let media = content_type.split(|&b| b == b';').next();
    media
        .unwrap_or_default()
        .trim_ascii()
        .eq_ignore_ascii_case(b"application/json")
}

#[cfg(test)]
mod tests {
    use axum::http::header::ORIGIN;
    use axum::http::{HeaderMap, HeaderValue};

    use super::*;

    fn admit(
        headers: &HeaderMap,
        origins: &AllowedOrigins,
    ) -> Result<(), (StatusCode, JsonRpcError)> {
        super::admit(&SeenHeaders::read(headers), origins)
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn loopback_origins() {
        for ok in [
            "http://localhost",
            "http://localhost:5173",
            "https://LOCALHOST:1",
            "http://127.0.0.1:8080",
            "http://[::1]",
            "http://[::1]:3000",
        ] {
            assert!(is_loopback(ok), "{ok}");
        }
        for bad in [
            "null",
            "localhost",
            "file://",
            "ws://localhost",
            "http://localhost.evil.example",
            "http://evil.example/localhost",
            "http://localhost:",
            "http://localhost:123456",
            "http://localhost:80/",
            "http://localhost@evil.example",
            "http://127.0.0.1.nip.io",
            "http://127.0.0.2",
            "http://[::2]",
            "http://[::1",
            "http://[::1]x",
        ] {
            assert!(!is_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn what_is_admitted() {
        let json = ("content-type", "application/json");
        let loopback = AllowedOrigins::Loopback;
        assert!(admit(&headers(&[json]), &loopback).is_ok());
        let status = |pairs: &[(&'static str, &'static str)], origins: &AllowedOrigins| {
            admit(&headers(pairs), origins)
                .err()
                .map(|(s, _)| s.as_u16())
        };
        assert_eq!(status(&[], &loopback), Some(415));
        assert_eq!(
            status(&[("content-type", "text/plain")], &loopback),
            Some(415)
        );
        assert_eq!(status(&[json, json], &loopback), Some(415));
        assert_eq!(
            status(
                &[("content-type", "application/json; charset=utf-8")],
                &loopback
            ),
            None
        );
        assert_eq!(
            status(&[json, ("origin", "http://evil.example")], &loopback),
            Some(403)
        );
        assert_eq!(
            status(&[("origin", "null")], &loopback),
            Some(403),
            "Origin first"
        );
        let list = AllowedOrigins::list(["https://App.example.com/"]);
        assert_eq!(
            status(&[json, ("origin", "https://app.example.com")], &list),
            None
        );
        assert_eq!(
            status(&[json, ("origin", "http://localhost")], &list),
            Some(403)
        );
        assert_eq!(
            status(&[json, ("origin", "null")], &AllowedOrigins::Any),
            None
        );
        let mut odd = headers(&[json]);
        odd.insert(ORIGIN, HeaderValue::from_bytes(b"http://\xe9").unwrap());
        assert!(admit(&odd, &AllowedOrigins::Any).is_err(), "unreadable");
    }
}
