//! Redis for tests: the shared server `.ci/redis.sh` starts (each test
//! under key prefixes of its own), and private servers a test starts,
//! stops and starts again itself.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_task_layer::store::{RedisOptions, RedisStore};

/// The shared test server, or `None` (after a note) when not configured
/// outside CI.
pub fn url() -> Option<String> {
    super::server_url(
        "MCP_TASKS_REDIS_URL",
        "Redis",
        "source .ci/redis.sh; mcp_redis_start",
    )
}

/// Fresh, unique key prefixes for one test, their keys deleted when it
/// ends well.
pub struct Prefixes {
    pub url: String,
    pub base: String,
    n: AtomicUsize,
}

impl Prefixes {
    pub fn new(url: &str, test: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Prefixes {
            url: url.to_owned(),
            base: format!("t_{test}_{}_{nanos}", std::process::id()),
            n: AtomicUsize::new(0),
        }
    }

    pub fn next(&self) -> String {
        format!("{}_{}", self.base, self.n.fetch_add(1, Ordering::SeqCst))
    }

    pub async fn store(&self, prefix: &str) -> RedisStore {
        let options = RedisOptions::new().with_prefix(prefix).unwrap();
        RedisStore::connect_with(&self.url, options).await.unwrap()
    }

    /// The keys under every prefix of this test.
    pub async fn keys(&self) -> Vec<String> {
        let mut conn = connection(&self.url).await;
        redis::cmd("KEYS")
            .arg(format!("{}_*", self.base))
            .query_async(&mut conn)
            .await
            .unwrap()
    }

    pub async fn drop_all(self) {
        let keys = self.keys().await;
        let mut conn = connection(&self.url).await;
        for chunk in keys.chunks(500) {
            let () = redis::cmd("DEL")
                .arg(chunk)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }
}

/// A plain connection, for what a test checks on the server itself.
pub async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A redis-server of the test's own, on a free port, with its files
/// (append-only, fsync at every write) in a temporary directory; stopped
/// when dropped.
pub struct Private {
    pub port: u16,
    dir: tempfile::TempDir,
    args: Vec<String>,
    child: Option<Child>,
}

impl Private {
    /// Started with `args` added to the command line; `None` (after a
    /// note) where there is no redis-server, except under CI.
    pub fn start(args: &[&str]) -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_at(port, args)
    }

    /// [`start`](Self::start) on `port`.
    pub fn start_at(port: u16, args: &[&str]) -> Option<Self> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(!super::ci(), "CI=true but redis-server is not installed");
            eprintln!("note: skipping a Redis restart test: no redis-server");
            return None;
        }
        let mut server = Private {
            port,
            dir: tempfile::tempdir().unwrap(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            child: None,
        };
        server.resume();
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// Start the server again on the same port and files; returns once it
    /// answers.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .arg("--dir")
            .arg(self.dir())
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL the server (its append-only file has every write).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL redis-server");
            child.wait().expect("reap redis-server");
        }
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        self.kill();
    }
}
