//! Writing HTML: every text from a task goes through [`esc`]; the page
//! shell (navigation, the vendored stylesheet and script); times.

use std::fmt::Write as _;

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::access::Role;
use crate::protocol::TaskStatus;
use crate::store::Relative;

/// Every status, in the order the pages list them.
pub(crate) const STATUSES: [TaskStatus; 5] = [
    TaskStatus::Working,
    TaskStatus::InputRequired,
    TaskStatus::Completed,
    TaskStatus::Failed,
    TaskStatus::Cancelled,
];

/// `text` as HTML text or attribute value: `& < > " '` escaped, and
/// control characters other than tab and newline dropped.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    push_esc(&mut out, text);
    out
}

/// [`esc`] onto `out`.
pub(crate) fn push_esc(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
}

/// `text` as one component of a URL's path or query (RFC 3986 unreserved
/// characters kept, every other byte percent-encoded).
pub(crate) fn url_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A status as a coloured badge.
pub(crate) fn badge(status: TaskStatus) -> String {
    let s = status.as_str();
    format!(r#"<span class="badge s-{s}" data-status="{s}">{s}</span>"#)
}

/// Unix milliseconds as an RFC 3339 UTC time.
pub(crate) fn utc(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// A `<time>` element: relative text (`5m ago`), the UTC time on hover.
pub(crate) fn time_ago(ms: i64, now: i64) -> String {
    let at = utc(ms);
    let text = Relative {
        at_ms: ms,
        now_ms: now,
    };
    format!(r#"<time datetime="{at}" title="{at}">{text}</time>"#)
}

/// What every page knows of its request: where the dashboard is mounted,
/// who asks, and the CSRF token to put in its forms.
#[derive(Clone, Debug)]
pub(crate) struct PageCtx {
    /// The path the dashboard is mounted at, without a trailing `/` (empty
    /// at the root).
    pub(crate) base: String,
    /// The caller's role.
    pub(crate) role: Role,
    /// The session's CSRF token (none for a bearer token's caller, who
    /// posts no forms).
    pub(crate) csrf: Option<String>,
    /// The session cookie's value (none for a bearer token's caller): a
    /// live stream ends with its session.
    pub(crate) session: Option<String>,
}

impl PageCtx {
    /// `path` (starting with `/`) under the mount point.
    pub(crate) fn href(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The hidden CSRF field of a form.
    pub(crate) fn csrf_field(&self) -> String {
        match &self.csrf {
            Some(token) => format!(
                r#"<input type="hidden" name="csrf" value="{}">"#,
                esc(token)
            ),
            None => String::new(),
        }
    }
}

/// A whole page: `title`, the navigation, `body`; `events` is the SSE
/// stream's URL the script listens to, if the page is live.
pub(crate) fn page(ctx: &PageCtx, title: &str, events: Option<&str>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    let _ = write!(
        out,
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · MCP tasks</title>
<link rel="stylesheet" href="{css}">
<script src="{js}" defer></script>
</head>
<body data-events="{events}">
<header><nav><strong>MCP tasks</strong>
<a href="{overview}">Overview</a> <a href="{tasks}">Tasks</a>
<span class="spacer"></span>
<span id="live-state" class="muted">{live}</span>
<span class="role">{role}</span>
<form method="post" action="{sign_out}" class="inline">{csrf}<button type="submit" class="link">Sign out</button></form>
</nav></header>
<main>
<h1>{title}</h1>
{body}
</main>
</body></html>
"#,
        title = esc(title),
        css = esc(&ctx.href("/assets/dashboard.css")),
        js = esc(&ctx.href("/assets/dashboard.js")),
        events = esc(events.unwrap_or("")),
        overview = esc(&ctx.href("/")),
        tasks = esc(&ctx.href("/tasks")),
        live = if events.is_some() {
            "connecting…"
        } else {
            ""
        },
        role = ctx.role.as_str(),
        sign_out = esc(&ctx.href("/sign-out")),
        csrf = ctx.csrf_field(),
    );
    out
}

/// The sign-in page: one password field; `error` says why the last try
/// failed.
pub(crate) fn sign_in_page(base: &str, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!(r#"<p class="error" role="alert">{}</p>"#, esc(e)))
        .unwrap_or_default();
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · MCP tasks</title>
<link rel="stylesheet" href="{css}">
</head>
<body class="sign-in"><main>
<h1>MCP tasks</h1>
{error}
<form method="post" action="{action}">
<label for="token">Dashboard token</label>
<input type="password" id="token" name="token" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button>
</form>
</main></body></html>
"#,
        css = esc(&format!("{base}/assets/dashboard.css")),
        action = esc(&format!("{base}/sign-in")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_controls() {
        assert_eq!(
            esc(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert_eq!(esc("a\u{0}b\r\nc"), "ab\nc");
        assert_eq!(url_part("a b/é"), "a%20b%2F%C3%A9");
    }

    #[test]
    fn times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert!(time_ago(1_000, 61_000).contains(">1m ago<"));
    }
}
