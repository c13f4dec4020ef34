//! Who is asking: the `Origin` check on every `POST` (the MCP endpoint's,
//! `http::origin_admitted`), the caller's role from a bearer token or a
//! session cookie (401 without one), the sign-in and sign-out, and the
//! CSRF check of every action.

use std::sync::Arc;

use axum::extract::{Form, OriginalUri, Request, State};
use axum::http::header::{ACCEPT, AUTHORIZATION, LOCATION, SET_COOKIE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::access::{same_secret, Role};
use super::html::{sign_in_page, PageCtx};
use super::reply::{self, Refusal};
use super::sessions::{cookie_value, set_cookie};
use super::Shared;

/// The path the dashboard is mounted at, of a request: what the full path
/// has before the path the dashboard's router sees.
fn base_of(original: &str, inner: &str) -> String {
    let base = if inner == "/" {
        original.trim_end_matches('/')
    } else {
        original.strip_suffix(inner).unwrap_or("")
    };
    base.trim_end_matches('/').to_owned()
}

/// The request's mount point.
fn base(req: &Request) -> String {
    let inner = req.uri().path();
    let original = req
        .extensions()
        .get::<OriginalUri>()
        .map_or(inner, |o| o.0.path());
    base_of(original, inner)
}

fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

/// 401: the sign-in page for a browser, one sentence for anything else.
fn unauthorized(headers: &HeaderMap, base: &str, why: &str) -> Response {
    let mut response = if wants_html(headers) {
        reply::html(StatusCode::UNAUTHORIZED, sign_in_page(base, Some(why)))
    } else {
        Refusal::new(StatusCode::UNAUTHORIZED, why).into_response()
    };
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static(r#"Bearer realm="mcp-tasks-dashboard""#),
    );
    response
}

/// The middleware before every route: refuse a `POST` from a foreign
/// page (403), then find the caller (401 without one, but for the
/// sign-in page and the assets), and hand the page its [`PageCtx`].
pub(crate) async fn guard(
    State(shared): State<Arc<Shared>>,
    mut req: Request,
    next: Next,
) -> Response {
    let base = base(&req);
    let mut response = if req.method() == Method::POST
        && !crate::http::origin_admitted(req.headers(), &shared.origins)
    {
        Refusal::new(StatusCode::FORBIDDEN, "the Origin header is not allowed").into_response()
    } else {
        let path = req.uri().path();
        let open = path == "/sign-in" || path.starts_with("/assets/");
        let found = if shared.access.is_enabled() {
            caller(&shared, req.headers())
        } else {
            Ok(None)
        };
        match found {
            Ok(Some(caller)) => {
                req.extensions_mut().insert(PageCtx {
                    base: base.clone(),
                    role: caller.role,
                    csrf: caller.csrf,
                    session: caller.session,
                });
                next.run(req).await
            }
            Ok(None) if open => {
                req.extensions_mut().insert(Mount(base.clone()));
                next.run(req).await
            }
            Ok(None) => {
                let why = if shared.access.is_enabled() {
                    "sign in with a dashboard token"
                } else {
                    "the dashboard has no token set (MCP_TASKS_DASHBOARD_TOKEN): nobody may use it"
                };
                unauthorized(req.headers(), &base, why)
            }
            Err(why) => unauthorized(req.headers(), &base, why),
        }
    };
    reply::harden(&mut response);
    response
}

/// The mount point, for the routes open to everyone.
#[derive(Clone, Debug)]
pub(crate) struct Mount(pub(crate) String);

/// The caller's role, and its session's CSRF token and cookie: from
/// `Authorization: Bearer` (no session: such a caller is no browser with
/// ambient credentials), else from the session cookie. `Err` for a bearer
/// token that is wrong. An `Authorization` of another scheme (the HTTP
/// Basic of a proxy in front, which passes it on) is not the dashboard's:
/// the cookie decides.
fn caller(shared: &Shared, headers: &HeaderMap) -> Result<Option<Caller>, &'static str> {
    if let Some(token) = headers.get(AUTHORIZATION).and_then(bearer_token) {
        return shared
            .access
            .role_of(token)
            .map(|role| {
                Some(Caller {
                    role,
                    csrf: None,
                    session: None,
                })
            })
            .ok_or("the bearer token is not one of the dashboard's");
    }
    Ok(cookie_value(headers).and_then(|value| {
        let s = shared.sessions.get(value)?;
        Some(Caller {
            role: s.role,
            csrf: Some(s.csrf),
            session: Some(value.to_owned()),
        })
    }))
}

/// Who asks: a role and, for a browser, its session's CSRF token and
/// cookie.
struct Caller {
    role: Role,
    csrf: Option<String>,
    session: Option<String>,
}

/// The token of an `Authorization` value of the `Bearer` scheme (its name
/// in any case, RFC 9110 section 11.1); `None` for another scheme.
fn bearer_token(value: &HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// What every form posts: the session's CSRF token.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CsrfForm {
    csrf: String,
}

/// Refuse an action (403) from a read-only caller, or from a session
/// whose form lacks its CSRF token.
pub(crate) fn may_act(ctx: &PageCtx, form: &CsrfForm) -> Result<(), Refusal> {
    if ctx.role < Role::Full {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "the read-only role cannot act on tasks",
        ));
    }
    match &ctx.csrf {
        Some(token) if !same_secret(token, &form.csrf) => Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "the form's CSRF token is missing or not this session's: reload the page",
        )),
        _ => Ok(()),
    }
}

/// `GET /sign-in`.
pub(crate) async fn sign_in_form(
    mount: Option<axum::Extension<Mount>>,
    ctx: Option<axum::Extension<PageCtx>>,
) -> Response {
    let base = mount
        .map(|m| m.0 .0)
        .or(ctx.map(|c| c.0.base))
        .unwrap_or_default();
    reply::html(StatusCode::OK, sign_in_page(&base, None))
}

/// The sign-in form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SignIn {
    token: String,
}

/// `POST /sign-in`: a session cookie for a token of the dashboard's, and
/// back to the overview; 401 and the form again otherwise.
pub(crate) async fn sign_in(
    State(shared): State<Arc<Shared>>,
    mount: Option<axum::Extension<Mount>>,
    ctx: Option<axum::Extension<PageCtx>>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    let base = mount
        .map(|m| m.0 .0)
        .or(ctx.map(|c| c.0.base))
        .unwrap_or_default();
    let Some(role) = shared.access.role_of(form.token.trim()) else {
        return unauthorized(&headers, &base, "that is not a dashboard token");
    };
    let Some(id) = shared.sessions.start(role) else {
        return Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the system's random source failed: no session could be made",
        )
        .into_response();
    };
    let path = if base.is_empty() { "/" } else { &base };
    (
        StatusCode::SEE_OTHER,
        [
            (
                SET_COOKIE,
                set_cookie(Some(&id), path, shared.secure_cookie),
            ),
            (LOCATION, format!("{base}/")),
        ],
    )
        .into_response()
}

/// `POST /sign-out`: the session ends, the cookie is cleared.
pub(crate) async fn sign_out(
    State(shared): State<Arc<Shared>>,
    axum::Extension(ctx): axum::Extension<PageCtx>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Some(token) = &ctx.csrf {
        if !same_secret(token, &form.csrf) {
            return Refusal::new(StatusCode::FORBIDDEN, "the form's CSRF token is missing")
                .into_response();
        }
    }
    if let Some(id) = cookie_value(&headers) {
        shared.sessions.end(id);
    }
    let path = if ctx.base.is_empty() { "/" } else { &ctx.base };
    (
        StatusCode::SEE_OTHER,
        [
            (SET_COOKIE, set_cookie(None, path, shared.secure_cookie)),
            (LOCATION, format!("{}/sign-in", ctx.base)),
        ],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points() {
        assert_eq!(base_of("/ops/tasks/x", "/tasks/x"), "/ops");
        assert_eq!(base_of("/ops", "/"), "/ops");
        assert_eq!(base_of("/ops/", "/"), "/ops");
        assert_eq!(base_of("/tasks", "/tasks"), "");
        assert_eq!(base_of("/", "/"), "");
        assert_eq!(base_of("/a/b", "/c"), "");
    }
}
