//! The databases the harness crashes and starts again: a PostgreSQL
//! cluster of its own (Debian's binaries, as `.ci/postgres.sh` finds them,
//! stopped with `pg_ctl -m immediate`) and a redis-server of its own
//! (`tests/common/redis_db.rs`, SIGKILLed). Each on a free port of
//! 127.0.0.1, in a temporary directory, whatever CI already runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::redis_db::Private;

/// A database the harness can crash and start again on the same port and
/// files.
pub(crate) trait Database: Send {
    /// Its port on 127.0.0.1.
    fn port(&self) -> u16;
    /// A store URL (the `--store` of the example server) for `port`.
    fn url(&self, port: u16) -> String;
    /// Stop at once, with no shutdown (committed data must survive).
    fn crash(&mut self);
    /// Start again; returns once it accepts connections.
    fn start(&mut self);
    /// Its name in the output.
    fn name(&self) -> &'static str;
}

/// The newest `/usr/lib/postgresql/*/bin`, or `None` (after a note, and
/// not under CI) where PostgreSQL is not installed.
fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort_by_key(|p| {
        let v = p.parent().and_then(Path::file_name);
        v.and_then(|v| v.to_str()?.parse::<u32>().ok()).unwrap_or(0)
    });
    let bin = found.pop();
    if bin.is_none() {
        assert!(
            !crate::common::ci(),
            "CI=true but PostgreSQL is not installed"
        );
        eprintln!("note: skipping the PostgreSQL chaos run: no /usr/lib/postgresql/*/bin/initdb");
    }
    bin
}

fn root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// A PostgreSQL cluster of the harness's own.
pub(crate) struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    root: bool,
}

impl Postgres {
    pub(crate) fn create() -> Option<Postgres> {
        let bin = pg_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("mcp-chaos-pg")
            .tempdir()
            .unwrap();
        let root = root();
        // The cluster's directory (data, log, socket) is its owner's: as
        // root, `postgres`, as .ci/postgres.sh does.
        let home = dir.path().join("pg");
        if root {
            run(Command::new("chmod").arg("755").arg(dir.path()));
            run(Command::new("install")
                .args(["-d", "-o", "postgres", "-g", "postgres", "-m", "700"])
                .arg(&home));
        } else {
            std::fs::create_dir(&home).unwrap();
        }
        let data = home.join("data");
        let mut pg = Postgres {
            bin,
            dir,
            port: free_port(),
            root,
        };
        let initdb = pg.bin.join("initdb");
        let mut init = pg.as_owner(&initdb);
        init.arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run(&mut init);
        pg.start();
        Some(pg)
    }

    fn as_owner(&self, program: &Path) -> Command {
        if self.root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn pg_ctl(&self, args: &[&str]) -> Command {
        let mut c = self.as_owner(&self.bin.join("pg_ctl"));
        c.arg("-D").arg(self.dir.path().join("pg/data")).args(args);
        c
    }
}

impl Database for Postgres {
    fn port(&self) -> u16 {
        self.port
    }

    fn url(&self, port: u16) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/postgres")
    }

    fn crash(&mut self) {
        run(&mut self.pg_ctl(&["-m", "immediate", "-w", "stop"]));
    }

    fn start(&mut self) {
        // Durable commits (`synchronous_commit` on): an acked write is in
        // the WAL when the server is killed. `fsync` off: the files outlive
        // a process crash in the page cache, not a power cut.
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().join("pg").display()
        );
        let log = self.dir.path().join("pg/server.log");
        let log = log.display().to_string();
        run(&mut self.pg_ctl(&["-l", &log, "-w", "-t", "60", "-o", &opts, "start"]));
    }

    fn name(&self) -> &'static str {
        "postgres"
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "-w", "stop"]).output();
    }
}

/// A redis-server of the harness's own: append-only, fsync at every
/// write, `noeviction`.
pub(crate) struct Redis(Private);

impl Redis {
    pub(crate) fn create() -> Option<Redis> {
        Private::start_at(free_port(), &["--maxmemory-policy", "noeviction"]).map(Redis)
    }
}

impl Database for Redis {
    fn port(&self) -> u16 {
        self.0.port
    }

    fn url(&self, port: u16) -> String {
        format!("redis://127.0.0.1:{port}/0")
    }

    fn crash(&mut self) {
        self.0.kill();
    }

    fn start(&mut self) {
        self.0.resume();
    }

    fn name(&self) -> &'static str {
        "redis"
    }
}

/// A free port below the ephemeral range (32768 and up on Linux): a port
/// the database or the front binds again after a restart, which an
/// outgoing connection must not have taken meanwhile.
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Each call starts further on: two engines' runs in one process do not
    // pick the same port before either binds it.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id() % 12_000 + NEXT.fetch_add(101, Ordering::Relaxed);
    (0..12_000)
        .map(|i| 20_000 + ((start + i * 7) % 12_000) as u16)
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port below 32000")
}

fn run(cmd: &mut Command) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
