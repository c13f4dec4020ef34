//! CPU time by process, from `/proc` (Linux; zero elsewhere): this
//! process (the front), its waited-for children (the worker processes),
//! and the database server when its pid is given (`FVA_DB_PID`: the
//! postmaster, whose children's time includes every backend that exited,
//! or redis-server; or both, comma-separated, for a run of both engines:
//! their sum, the idle one's share a few ms a second).

/// Seconds of CPU: (this process, its children, the database).
#[derive(Clone, Copy, Default)]
pub struct Cpu {
    pub front: f64,
    pub workers: f64,
    pub db: f64,
}

/// Fields 14..=17 of `/proc/<pid>/stat` (utime, stime, cutime, cstime),
/// in seconds at 100 ticks a second.
fn times(pid: &str) -> Option<[f64; 4]> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces; fields start after its `)`.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    // After `)`: state is field 3, so utime (14) is index 11.
    Some([tick(11), tick(12), tick(13), tick(14)])
}

impl Cpu {
    pub fn now() -> Cpu {
        let me = times("self").unwrap_or_default();
        let db = std::env::var("FVA_DB_PID")
            .unwrap_or_default()
            .split(',')
            .filter_map(|pid| times(pid.trim()))
            .map(|t| t.iter().sum::<f64>())
            .sum();
        Cpu {
            front: me[0] + me[1],
            workers: me[2] + me[3],
            db,
        }
    }

    pub fn since(self, before: Cpu) -> Cpu {
        Cpu {
            front: self.front - before.front,
            workers: self.workers - before.workers,
            db: self.db - before.db,
        }
    }

    /// Milliseconds of CPU per 1,000 tasks, each.
    pub fn per_1000(self, tasks: usize) -> String {
        let k = tasks as f64 / 1000.0;
        let db = if std::env::var("FVA_DB_PID").is_ok() {
            format!(", database {:.0} ms", self.db * 1000.0 / k)
        } else {
            String::new()
        };
        format!(
            "CPU per 1,000 tasks: front {:.0} ms, workers {:.0} ms{db}",
            self.front * 1000.0 / k,
            self.workers * 1000.0 / k
        )
    }
}
