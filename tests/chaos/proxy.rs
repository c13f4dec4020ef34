//! A TCP fault proxy between one process and the database: every
//! connection is copied both ways, and on demand delayed, reset or
//! swallowed (a black hole: bytes are read and dropped, nothing answers).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to the bytes it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Copied as they come.
    Pass,
    /// Each chunk held this long before it is sent on.
    Delay(Duration),
    /// Held, not sent on, until the mode changes (the schedule resets the
    /// connections at the end of a black hole, as a long partition's
    /// timeouts would); new connections are accepted and hang.
    BlackHole,
}

/// One proxy: a port of its own in front of `upstream`.
pub(crate) struct Proxy {
    pub(crate) port: u16,
    mode: watch::Sender<(Mode, u64)>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub(crate) async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mode, watch) = watch::channel((Mode::Pass, 0));
        let watch = Arc::new(watch);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(carry(client, upstream, (*watch).clone()));
            }
        });
        Proxy { port, mode, task }
    }

    pub(crate) fn set(&self, mode: Mode) {
        self.mode.send_modify(|m| m.0 = mode);
    }

    /// Close every connection carried now (a reset from the network's
    /// side); new ones are carried as before.
    pub(crate) fn reset(&self) {
        self.mode.send_modify(|m| m.1 += 1);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn carry(client: TcpStream, upstream: u16, mut mode: watch::Receiver<(Mode, u64)>) {
    let generation = mode.borrow().1;
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        return; // the database is down: the client sees a closed connection
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = pump(cr, sw, mode.clone());
    let down = pump(sr, cw, mode.clone());
    tokio::select! {
        () = up => {}
        () = down => {}
        _ = mode.wait_for(|m| m.1 != generation) => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<(Mode, u64)>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let now = mode.borrow().0;
        match now {
            Mode::Pass => {}
            Mode::Delay(d) => tokio::time::sleep(d).await,
            Mode::BlackHole => {
                let _ = mode.wait_for(|m| m.0 != Mode::BlackHole).await;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
