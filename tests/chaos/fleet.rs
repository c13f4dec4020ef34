//! The fleet under test and the faults done to it: one front and several
//! workers of the example server as processes of their own, each reaching
//! the database through a fault proxy of its own, and a seeded schedule of
//! faults (SIGKILL, SIGSTOP past the lease, the database crashed, the
//! front restarted, delays, resets and black holes on one process's link).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::features::this_build;
use crate::common::process::Process;
use crate::engines::{free_port, Database};
use crate::proxy::{Mode, Proxy};
use crate::rng::Rng;

/// Every process's lease (seconds): short, so that recoveries happen
/// within the run.
pub(crate) const LEASE_SECS: u64 = 3;

/// One process of the fleet and its link to the database.
struct Member {
    role: &'static str,
    proxy: Proxy,
    log: PathBuf,
    process: Option<Process>,
}

/// One fault done, and whom it touched.
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    pub(crate) began: Instant,
    pub(crate) ended: Instant,
    pub(crate) what: String,
    /// The member it was done to (0 the front, then the workers); `None`
    /// for the database, which every member needs.
    pub(crate) member: Option<usize>,
}

impl Fault {
    /// Whether it could have touched what member `m` runs.
    pub(crate) fn touches(&self, m: usize) -> bool {
        self.member.is_none_or(|x| x == m)
    }
}

pub(crate) struct Fleet {
    server: PathBuf,
    pub(crate) db: Box<dyn Database>,
    pub(crate) front_port: u16,
    members: Vec<Member>,
    _dir: tempfile::TempDir,
    /// Each fault: when it began and ended, and what it was.
    pub(crate) faults: Vec<Fault>,
}

impl Fleet {
    /// The front (member 0) and `workers` workers, all with `--recovery
    /// rerun`, started and ready.
    pub(crate) async fn start(db: Box<dyn Database>, workers: usize) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let server = build_server(dir.path());
        let mut members = Vec::new();
        for i in 0..=workers {
            members.push(Member {
                role: if i == 0 { "front" } else { "worker" },
                proxy: Proxy::start(db.port()).await,
                log: dir.path().join(format!("run-{i}.log")),
                process: None,
            });
        }
        let mut fleet = Fleet {
            server,
            db,
            front_port: free_port(),
            members,
            _dir: dir,
            faults: Vec::new(),
        };
        for i in 0..fleet.members.len() {
            assert!(fleet.launch(i), "member {i} did not start");
        }
        fleet
    }

    pub(crate) fn front_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.front_port)
    }

    /// The run logs of every worker.
    pub(crate) fn logs(&self) -> Vec<PathBuf> {
        self.members.iter().skip(1).map(|m| m.log.clone()).collect()
    }

    /// Start member `i`; whether it came up (it exits when the database
    /// cannot be reached).
    fn launch(&mut self, i: usize) -> bool {
        let port = self.front_port.to_string();
        let m = &mut self.members[i];
        let mut args = vec![
            "--store".to_owned(),
            self.db.url(m.proxy.port),
            "--recovery".into(),
            "rerun".into(),
            "--lease-ttl".into(),
            LEASE_SECS.to_string(),
            "--drain-secs".into(),
            "1".into(),
            "--run-log".into(),
            m.log.display().to_string(),
            "--role".into(),
            m.role.into(),
        ];
        if m.role == "front" {
            args.extend(["--port".into(), port]);
        } else {
            args.extend(["--concurrency".into(), "8".into()]);
        }
        let process = tokio::task::block_in_place(|| Process::start_binary(&self.server, &args));
        let up =
            process.first_line.starts_with("listening on") || process.first_line == "worker ready";
        m.process = up.then_some(process);
        up
    }

    /// Start again every member that is not running.
    fn revive(&mut self) {
        for i in 0..self.members.len() {
            let gone = match &mut self.members[i].process {
                Some(p) => p.exited(),
                None => true,
            };
            if gone {
                self.members[i].process = None;
                let _ = self.launch(i);
            }
        }
    }

    fn signal(&self, i: usize, sig: &str) {
        if let Some(p) = &self.members[i].process {
            let _ = Command::new("kill")
                .args([sig, &p.id().to_string()])
                .status();
        }
    }

    /// Inject faults, one at a time, from the seeded `rng` until `until`;
    /// then heal everything and return.
    pub(crate) async fn rampage(&mut self, rng: &mut Rng, until: Instant) {
        let workers = self.members.len() - 1;
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(rng.range(200, 1500))).await;
            let began = Instant::now();
            let worker = 1 + rng.below(workers as u64) as usize;
            let anyone = rng.below(self.members.len() as u64) as usize;
            let (what, member) = match rng.below(7) {
                0 => {
                    self.signal(worker, "-KILL");
                    (format!("SIGKILL worker {worker}"), Some(worker))
                }
                1 => {
                    self.signal(worker, "-STOP");
                    let held = LEASE_SECS * 1000 + rng.range(500, 2000);
                    tokio::time::sleep(Duration::from_millis(held)).await;
                    self.signal(worker, "-CONT");
                    (
                        format!("SIGSTOP worker {worker} for {held} ms"),
                        Some(worker),
                    )
                }
                2 => {
                    let down = rng.range(300, 3000);
                    tokio::task::block_in_place(|| self.db.crash());
                    tokio::time::sleep(Duration::from_millis(down)).await;
                    tokio::task::block_in_place(|| self.db.start());
                    (format!("{} crashed for {down} ms", self.db.name()), None)
                }
                3 => {
                    self.signal(0, "-KILL");
                    ("SIGKILL front".to_owned(), Some(0))
                }
                4 => {
                    let ms = rng.range(20, 400);
                    self.members[anyone]
                        .proxy
                        .set(Mode::Delay(Duration::from_millis(ms)));
                    tokio::time::sleep(Duration::from_millis(rng.range(1000, 4000))).await;
                    self.members[anyone].proxy.set(Mode::Pass);
                    (
                        format!("delay {ms} ms on member {anyone}'s link"),
                        Some(anyone),
                    )
                }
                5 => {
                    self.members[anyone].proxy.reset();
                    (format!("reset member {anyone}'s link"), Some(anyone))
                }
                _ => {
                    let ms = rng.range(1000, 2 * LEASE_SECS * 1000);
                    self.members[anyone].proxy.set(Mode::BlackHole);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    self.members[anyone].proxy.set(Mode::Pass);
                    self.members[anyone].proxy.reset();
                    (
                        format!("black hole {ms} ms on member {anyone}'s link"),
                        Some(anyone),
                    )
                }
            };
            self.revive();
            self.faults.push(Fault {
                began,
                ended: Instant::now(),
                what,
                member,
            });
        }
        self.heal().await;
    }

    /// Every link passing, every member running.
    pub(crate) async fn heal(&mut self) {
        for m in &self.members {
            m.proxy.set(Mode::Pass);
        }
        for i in 0..self.members.len() {
            self.signal(i, "-CONT");
        }
        for _ in 0..20 {
            self.revive();
            if self.members.iter().all(|m| m.process.is_some()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("the fleet did not come back up");
    }
}

/// The example server, built from this checkout with this build's
/// features and hard-linked into `dir`: the target directory's copy may be
/// replaced meanwhile by a build of another checkout sharing it, and the
/// fleet starts processes for the whole run.
fn build_server(dir: &Path) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--example", "server", "--features", &this_build()])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    assert!(
        cmd.status().unwrap().success(),
        "building the example server failed"
    );
    let bin = dir.join("server");
    std::fs::hard_link(profile.join("examples/server"), &bin)
        .or_else(|_| std::fs::copy(profile.join("examples/server"), &bin).map(drop))
        .expect("the example server, linked into the fleet's directory");
    bin
}
