//! The example server as a process of its own: built if missing, started
//! with arguments, stopped with SIGTERM (a deploy) or SIGKILL (a crash).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `target/<profile>/examples/server`, built with `features` if missing
/// (`cargo test --all-features` builds it already).
pub fn server_binary(features: &str) -> PathBuf {
    example_binary("server", features)
}

/// `target/<profile>/examples/<name>`, built with `features` if missing.
pub fn example_binary(name: &str, features: &str) -> PathBuf {
    // target/<profile>/deps/<test>-<hash> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile_dir.join("examples").join(name);
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--example", name, "--features", features])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo build --example");
        assert!(status.success(), "building the example {name} failed");
    }
    bin
}

/// A running example server; SIGKILLed when dropped.
pub struct Process {
    child: Child,
    /// What it printed first (`listening on URL`, `worker ready`).
    pub first_line: String,
}

impl Process {
    pub fn start(features: &str, args: &[String]) -> Process {
        Process::start_example("server", features, args, &[])
    }

    /// Example `name` with `args` and `envs`.
    pub fn start_example(
        name: &str,
        features: &str,
        args: &[String],
        envs: &[(&str, &str)],
    ) -> Process {
        Self::start_binary_with(&example_binary(name, features), args, envs)
    }

    /// [`start`](Self::start) of the server binary at `bin`.
    pub fn start_binary(bin: &Path, args: &[String]) -> Process {
        Self::start_binary_with(bin, args, &[])
    }

    /// The binary at `bin` with `args` and `envs`.
    pub fn start_binary_with(bin: &Path, args: &[String], envs: &[(&str, &str)]) -> Process {
        let mut child = Command::new(bin)
            .args(args)
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the example server");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the server's first line");
        Process {
            child,
            first_line: line.trim().to_owned(),
        }
    }

    /// Its process id (for signals of a test's own: SIGSTOP, SIGCONT).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (and is reaped).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// The URL of `listening on URL`.
    pub fn url(&self) -> &str {
        self.first_line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("not an HTTP server: {:?}", self.first_line))
    }

    /// SIGTERM, as a deploy stops a process: it drains, then exits.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Wait for the process to exit (after [`terminate`](Self::terminate)).
    pub fn wait(mut self) {
        self.child.wait().expect("reap the server");
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap the server");
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
