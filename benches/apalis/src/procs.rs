//! The worker processes of one run: this bench's binary again, with
//! `FVA_WORKER` set; each stops when its stdin closes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::side::{Engine, System};

pub struct Fleet {
    children: Vec<Child>,
}

impl Fleet {
    /// Start `n` workers of `system` on `name` and wait until each has
    /// connected and is about to claim.
    pub fn start(engine: &Engine, system: System, name: &str, job: &str, n: usize) -> Fleet {
        let exe = std::env::current_exe().expect("this bench's path");
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            let child = Command::new(&exe)
                .env("FVA_WORKER", system.as_str())
                .env("FVA_ENGINE", &engine.name)
                .env("FVA_URL", &engine.url)
                .env("FVA_NAME", name)
                .env("FVA_JOB", job)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("a worker process");
            children.push(child);
        }
        for child in &mut children {
            let out = child.stdout.take().expect("its stdout");
            let mut line = String::new();
            BufReader::new(out).read_line(&mut line).expect("ready");
            assert_eq!(line.trim(), "ready", "the worker started");
        }
        Fleet { children }
    }

    /// Close every worker's stdin and wait for it to exit.
    pub fn stop(mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
        }
        for child in &mut self.children {
            let _ = child.wait();
        }
    }
}
