//! `mcp-tasks dashboard` in a real browser: Debian's Chromium driven over
//! WebDriver (chromedriver, through the `fantoccini` client). A `TaskLayer`
//! in this test writes tasks to a SQLite file; the binary serves the
//! dashboard over it. The test signs in, sees the waiting task on the
//! overview, opens it, sees its `<script>` argument as text, presses
//! Cancel and sees `cancelled` arrive over SSE with no reload. It saves
//! the overview's screenshot as `docs/dashboard.png` (the README's).
//!
//! Needs `chromedriver` and `chromium` (`apt-get install chromium
//! chromium-driver`; `CHROMEDRIVER` and `CHROMIUM` name other paths).
//! Without them it skips with a message, except under `CI=true`, where it
//! fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{server, start, until_status};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use mcp_task_layer::{TaskLayer, TaskPolicy, TaskStatus};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const TOKEN: &str = "browser-test-dashboard-token";
const SCRIPT_ARGUMENT: &str = "<script>document.title='pwned'</script>";
/// How long the browser may take to show what is awaited.
const PATIENCE: Duration = Duration::from_secs(30);

/// The program at `$var`, else at `default` if it exists.
fn program(var: &str, default: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from(default)))
        .filter(|p| p.exists())
}

/// Start `mcp-tasks dashboard` on a free port; its base URL.
async fn dashboard(store: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-tasks"))
        .args(["dashboard", "--listen", "127.0.0.1:0", "--store", store])
        .env("MCP_TASKS_DASHBOARD_TOKEN", TOKEN)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("mcp-tasks dashboard runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .await
        .expect("its first line");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("not `listening on URL`: {line:?}"))
        .to_owned();
    (child, url)
}

/// Start chromedriver on a free port; its URL once it accepts connections
/// (polled, at most 30 s).
async fn webdriver(program: &Path) -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(program)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver runs");
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (child, format!("http://127.0.0.1:{port}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("chromedriver never listened on port {port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_see_a_waiting_task_cancel_it_live_and_its_script_argument_stays_text() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let (Some(driver), Some(chromium)) = (
        program("CHROMEDRIVER", "/usr/bin/chromedriver"),
        program("CHROMIUM", "/usr/bin/chromium"),
    ) else {
        assert!(
            !ci,
            "CI=true: chromedriver or chromium is missing (apt-get install chromium chromium-driver)"
        );
        eprintln!(
            "skipped: no chromedriver or chromium (apt-get install chromium chromium-driver)"
        );
        return;
    };

    // Tasks in a SQLite file, written by a layer here: three done, one
    // running, one waiting for its client's answer.
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let store = mcp_task_layer::store::connect(&store_url).await.unwrap();
    // A short lease: the handler here hears of a cancel written by the
    // dashboard's process at its next heartbeat (SQLite has no change feed).
    let layer = TaskLayer::new(store)
        .with_default_policy(TaskPolicy::Task)
        .with_lease_ttl(Duration::from_millis(600));
    let stopped = Arc::new(AtomicUsize::new(0));
    let svc = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(server(Arc::clone(&stopped)));
    for n in 0..3 {
        let id = start(&svc, "carol", "report", json!({ "n": n })).await;
        until_status(&layer, &id, TaskStatus::Completed).await;
    }
    let hang = start(&svc, "alice", "hang", json!({ "city": "Paris" })).await;
    let ask = start(&svc, "bob", "ask", json!({ "note": SCRIPT_ARGUMENT })).await;
    until_status(&layer, &ask, TaskStatus::InputRequired).await;

    let (_dashboard, base) = dashboard(&store_url).await;
    let (_driver, driver_url) = webdriver(&driver).await;
    let profile = tempfile::tempdir().unwrap();
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--window-size=1280,1100",
                format!("--user-data-dir={}", profile.path().display()),
            ],
        },
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    let browser = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver_url)
        .await
        .expect("a Chromium session");
    let outcome = drive(&browser, &base, &ask, &hang).await;
    browser.close().await.ok();
    outcome.expect("the browser did what was asked");
    // The running handler, in this process, stopped (polled, at most 30 s).
    for _ in 0..600 {
        if stopped.load(Ordering::SeqCst) == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the handler of {hang} never heard of the dashboard's cancel");
}

/// Whether `e` says an element found before was replaced meanwhile (the
/// page's live part is swapped whenever it changes).
fn is_stale(e: &fantoccini::error::CmdError) -> bool {
    matches!(e, fantoccini::error::CmdError::Standard(w)
        if w.error == fantoccini::error::ErrorStatus::StaleElementReference)
}

/// Find `css` and click it, finding it again if a live update replaced it
/// in between (at most 10 times).
async fn click(browser: &Client, css: &str) -> Result<(), fantoccini::error::CmdError> {
    let mut tries = 0;
    loop {
        let found = browser
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await?;
        match found.click().await {
            Err(e) if is_stale(&e) && tries < 10 => tries += 1,
            other => return other,
        }
    }
}

/// The text of `css`, found again if a live update replaced it in between.
async fn text(browser: &Client, css: &str) -> Result<String, fantoccini::error::CmdError> {
    let mut tries = 0;
    loop {
        let found = browser.find(Locator::Css(css)).await?;
        match found.text().await {
            Err(e) if is_stale(&e) && tries < 10 => tries += 1,
            other => return other,
        }
    }
}

/// Everything done in the browser; `Err` for a WebDriver failure.
async fn drive(
    browser: &Client,
    base: &str,
    ask: &str,
    hang: &str,
) -> Result<(), fantoccini::error::CmdError> {
    // Signed out: the sign-in page, one password field.
    browser.goto(&format!("{base}/")).await?;
    let token = browser.find(Locator::Css("input[type=password]")).await?;
    token.send_keys(TOKEN).await?;
    browser
        .find(Locator::Css("button[type=submit]"))
        .await?
        .click()
        .await?;

    // The overview: the waiting task, its count.
    let link = format!("a[href=\"/tasks/{ask}\"]");
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(&link))
        .await?;
    let waiting = text(browser, "[data-count=input_required]").await?;
    assert_eq!(waiting, "1", "one task waits for input");
    let shot = browser.screenshot().await?;
    let png = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/dashboard.png");
    std::fs::write(&png, &shot).expect("docs/dashboard.png written");
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");

    // Its page: the argument as text, no script of the task's run.
    click(browser, &link).await?;
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#cancel"))
        .await?;
    let arguments = text(browser, "#arguments pre").await?;
    assert!(
        arguments.contains(SCRIPT_ARGUMENT),
        "shown as text: {arguments}"
    );
    let title = browser.execute("return document.title", vec![]).await?;
    assert!(
        !title.as_str().unwrap_or_default().contains("pwned"),
        "{title}"
    );
    let scripts = browser
        .execute("return document.scripts.length", vec![])
        .await?;
    assert_eq!(scripts, json!(1), "the dashboard's own script only");

    // Cancel: `cancelled` arrives over SSE, the page is never reloaded
    // (a value set on this window survives).
    browser
        .execute("window.notReloaded = 'still here'", vec![])
        .await?;
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::XPath(
            "//span[@id='live-state'][starts-with(., 'live')]",
        ))
        .await?;
    click(browser, "#cancel").await?;
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#task-status [data-status=cancelled]"))
        .await?;
    let kept = browser.execute("return window.notReloaded", vec![]).await?;
    assert_eq!(kept, json!("still here"), "no reload");
    let history = text(browser, "#history").await?;
    assert!(history.contains("cancelled"), "{history}");

    // A running task, whose handler runs in another process (this test's).
    browser.goto(&format!("{base}/tasks/{hang}")).await?;
    click(browser, "#cancel").await?;
    browser
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#task-status [data-status=cancelled]"))
        .await?;
    Ok(())
}

/// A client that sends half a request head and no more gets 408 and its
/// connection closed at the server's header deadline (30 s), as from
/// every server of the crate. Before, `mcp-tasks dashboard` served with
/// `axum::serve`, which has no deadline: such clients held their
/// connections for ever, and enough of them took every file descriptor.
#[tokio::test]
async fn a_client_that_never_finishes_its_request_head_is_let_go() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    mcp_task_layer::store::connect(&store)
        .await
        .expect("a new store");
    let (_dashboard, url) = dashboard(&store).await;
    let addr = url.strip_prefix("http://").expect("an http URL");
    let mut conn = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    conn.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("half a head");
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(45), conn.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "still open 45 s after half a head");
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
}
