//! Markers from outside: `flatline mark TEXT` reaches a running `watch`,
//! `soak` or `live` over a Unix socket.
//!
//! Every recording session listens on `<dir>/<pid>-<n>.sock`, with
//! `<dir>/<pid>-<n>.json` beside it saying what it is (kind, watched PID,
//! recording). `<dir>` is `$XDG_RUNTIME_DIR/flatline`, else
//! `<temp>/flatline-<uid>`, made readable by its user only; a folder owned
//! by someone else or open to others is refused. The socket is its user's
//! alone too, and the server checks each connection's user with
//! `SO_PEERCRED` besides. A message is the marker's text, at most
//! [`MAX_MESSAGE`] bytes of UTF-8, sent before the client shuts its side; the
//! answer is one line, `ok` or `refused: <why>`. Anything else (another
//! user, a message too long, bytes that are not text, a client that says
//! nothing) is refused and logged on standard error, never a crash.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// Longest marker text accepted, in bytes.
pub const MAX_MESSAGE: usize = 4096;

/// How long a client has to send its text.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The folder the sessions' sockets live in, made if needed.
pub fn socket_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("flatline"),
        None => std::env::temp_dir().join(format!("flatline-{}", flatline_arena::sys::uid())),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir).with_context(|| format!("{}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != flatline_arena::sys::uid() {
        bail!(
            "{} is not a folder of this user's: markers need one only this user can open",
            dir.display()
        );
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "{} is open to other users (mode {:o}): markers need a folder only this user can open",
            dir.display(),
            meta.mode() & 0o777
        );
    }
    Ok(dir)
}

/// What a listening session says about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listening {
    /// The flatline process.
    pub pid: u32,
    /// `watch`, `soak` or `live`.
    pub kind: String,
    /// The process a watch watches.
    pub target_pid: Option<u32>,
    /// The recording it writes, if any.
    pub recording: Option<PathBuf>,
    /// Where it listens.
    pub socket: PathBuf,
}

impl Listening {
    fn describe(&self) -> String {
        let mut s = format!("{} {}", self.kind, self.pid);
        if let Some(t) = self.target_pid {
            s.push_str(&format!(" (process {t})"));
        }
        if let Some(r) = &self.recording {
            s.push_str(&format!(" → {}", r.display()));
        }
        s
    }
}

/// Checks a message: the marker's text, or why it is refused.
pub fn check_message(bytes: &[u8]) -> Result<String, String> {
    if bytes.len() > MAX_MESSAGE {
        return Err(format!("over {MAX_MESSAGE} bytes"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    let text = text.trim();
    if text.is_empty() {
        return Err("no text".into());
    }
    if text.chars().any(|c| c.is_control() && c != '\t') {
        return Err("control characters in the text".into());
    }
    Ok(text.to_owned())
}

/// A session's socket, listening on its own thread; closed and removed when
/// dropped.
#[derive(Debug)]
pub struct MarkServer {
    socket: PathBuf,
    info: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MarkServer {
    /// Listens for markers for this session; each accepted text is given to
    /// `on_mark` (on the server's thread) as it arrives.
    pub fn start(
        kind: &str,
        target_pid: Option<u32>,
        recording: Option<&Path>,
        on_mark: impl Fn(String) + Send + 'static,
    ) -> Result<Self> {
        let dir = socket_dir()?;
        Self::start_in(&dir, kind, target_pid, recording, on_mark)
    }

    /// As [`MarkServer::start`], in `dir` (tests).
    pub fn start_in(
        dir: &Path,
        kind: &str,
        target_pid: Option<u32>,
        recording: Option<&Path>,
        on_mark: impl Fn(String) + Send + 'static,
    ) -> Result<Self> {
        // One process may hold several sessions (the tests do).
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let socket = dir.join(format!("{pid}-{n}.sock"));
        let info = dir.join(format!("{pid}-{n}.json"));
        // A socket left by an earlier process with our pid is stale.
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)
            .with_context(|| format!("listening on {}", socket.display()))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("making {} private", socket.display()))?;
        let me = Listening {
            pid,
            kind: kind.into(),
            target_pid,
            recording: recording.map(|r| std::path::absolute(r).unwrap_or_else(|_| r.to_owned())),
            socket: socket.clone(),
        };
        std::fs::write(&info, serde_json::to_vec(&me)?)
            .with_context(|| format!("writing {}", info.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("flatline-mark".into())
                .spawn(move || {
                    flatline_telemetry::alloc::mark_observer_thread();
                    for conn in listener.incoming() {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        match conn {
                            Ok(c) => {
                                if let Err(why) = serve(c, &on_mark) {
                                    eprintln!("flatline: a marker was refused: {why}");
                                }
                            }
                            Err(e) => {
                                eprintln!("flatline: the marker socket failed: {e}");
                                std::thread::sleep(Duration::from_millis(100));
                            }
                        }
                    }
                })
                .context("starting the marker socket's thread")?
        };
        Ok(Self {
            socket,
            info,
            stop,
            thread: Some(thread),
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

/// Starts a session's marker socket, or says on standard error why markers
/// cannot reach it (the session goes on without them).
pub fn listen(
    kind: &str,
    target_pid: Option<u32>,
    recording: Option<&Path>,
    on_mark: impl Fn(String) + Send + 'static,
) -> Option<MarkServer> {
    MarkServer::start(kind, target_pid, recording, on_mark)
        .map_err(|e| eprintln!("flatline: `flatline mark` cannot reach this {kind}: {e:#}"))
        .ok()
}

/// One connection: the text, checked, or the reason it is refused (which
/// the client is told too).
fn serve(mut c: UnixStream, on_mark: &impl Fn(String)) -> Result<(), String> {
    let me = flatline_arena::sys::uid();
    let verdict = match flatline_arena::sys::peer_uid(&c) {
        Err(e) => Err(format!("the sender is unknown ({e})")),
        Ok(uid) if uid != me => Err(format!("sent by user {uid}, not this user ({me})")),
        Ok(_) => {
            let _ = c.set_read_timeout(Some(READ_TIMEOUT));
            let mut buf = Vec::with_capacity(256);
            match (&mut c).take(MAX_MESSAGE as u64 + 1).read_to_end(&mut buf) {
                Ok(_) => {
                    if buf.len() > MAX_MESSAGE {
                        // Read (a bounded amount of) the rest, so that the
                        // client gets the answer rather than a reset.
                        let _ = std::io::copy(&mut (&mut c).take(1 << 20), &mut std::io::sink());
                    }
                    check_message(&buf)
                }
                Err(e) => Err(format!("reading it: {e}")),
            }
        }
    };
    let reply = match &verdict {
        Ok(_) => "ok\n".to_owned(),
        Err(why) => format!("refused: {why}\n"),
    };
    let _ = c.write_all(reply.as_bytes());
    let text = verdict?;
    on_mark(text);
    Ok(())
}

impl Drop for MarkServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which then sees the flag. Where the
        // socket has gone (a cleaner emptied its folder) nothing can wake it:
        // it is left to end with the process rather than waited for forever.
        let woken = UnixStream::connect(&self.socket).is_ok();
        if let Some(t) = self.thread.take()
            && woken
        {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.info);
    }
}

/// The sessions listening in `dir`; stale entries of processes that are
/// gone are removed.
pub fn listening(dir: &Path) -> Result<Vec<Listening>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Some(l) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Listening>(&b).ok())
        else {
            continue;
        };
        // Gone: its process (or its socket) is no more. Not probed by
        // connecting, which the session would take for a message.
        if !l.socket.exists() || !Path::new(&format!("/proc/{}", l.pid)).exists() {
            let _ = std::fs::remove_file(&path);
            if l.socket.parent() == Some(dir) {
                let _ = std::fs::remove_file(&l.socket);
            }
            continue;
        }
        out.push(l);
    }
    out.sort_by_key(|l| l.pid);
    Ok(out)
}

/// Which session `to` names (a flatline PID, a watched PID or a recording),
/// or the only one running.
pub fn choose(sessions: Vec<Listening>, to: Option<&str>) -> Result<Listening> {
    let list = |ls: &[Listening]| {
        ls.iter()
            .map(|l| format!("\n  {}", l.describe()))
            .collect::<String>()
    };
    let Some(to) = to else {
        return match sessions.len() {
            0 => bail!("no flatline watch, soak or live is running for this user"),
            1 => Ok(sessions.into_iter().next().expect("one")),
            _ => bail!(
                "{} flatline sessions are running; say which with --to PID or --to FILE:{}",
                sessions.len(),
                list(&sessions)
            ),
        };
    };
    let found = if let Ok(pid) = to.parse::<u32>() {
        sessions
            .iter()
            .find(|l| l.pid == pid || l.target_pid == Some(pid))
    } else {
        let want = std::path::absolute(to).unwrap_or_else(|_| PathBuf::from(to));
        let want = want.canonicalize().unwrap_or(want);
        sessions.iter().find(|l| {
            l.recording
                .as_ref()
                .is_some_and(|r| r.canonicalize().unwrap_or_else(|_| r.clone()) == want)
        })
    };
    match found {
        Some(l) => Ok(l.clone()),
        None if sessions.is_empty() => {
            bail!("no flatline watch, soak or live is running for this user")
        }
        None => bail!("none of the running sessions is {to}:{}", list(&sessions)),
    }
}

/// Sends `text` to a listening session; its answer if refused.
pub fn send(to: &Listening, text: &str) -> Result<()> {
    let mut c = UnixStream::connect(&to.socket)
        .with_context(|| format!("connecting to {}", to.describe()))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    c.write_all(text.as_bytes())
        .and_then(|()| c.shutdown(std::net::Shutdown::Write))
        .with_context(|| format!("sending to {}", to.describe()))?;
    let mut reply = String::new();
    c.read_to_string(&mut reply)
        .with_context(|| format!("waiting for {}'s answer", to.describe()))?;
    match reply.trim() {
        "ok" => Ok(()),
        other => bail!(
            "{} {}",
            to.describe(),
            other.strip_prefix("refused: ").map_or_else(
                || format!("did not answer ({other:?})"),
                |why| format!("refused the marker: {why}")
            )
        ),
    }
}

/// `flatline mark TEXT [--to PID|FILE]`: `text` to the session `to` names
/// (the only one running when `None`).
pub fn run(text: &str, to: Option<&str>) -> Result<()> {
    let text =
        check_message(text.as_bytes()).map_err(|why| anyhow::anyhow!("the marker: {why}"))?;
    let dir = socket_dir()?;
    let to = choose(listening(&dir)?, to)?;
    send(&to, &text)?;
    println!("marked {:?} in {}", text, to.describe());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_checked() {
        assert_eq!(check_message(b"  lr to 3e-4\n").unwrap(), "lr to 3e-4");
        assert!(check_message(&[b'a'; MAX_MESSAGE]).is_ok());
        assert!(
            check_message(&[b'a'; MAX_MESSAGE + 1])
                .unwrap_err()
                .contains("over")
        );
        assert!(check_message(b"\xff\xfe").unwrap_err().contains("UTF-8"));
        assert!(check_message(b" \n").unwrap_err().contains("no text"));
        assert!(check_message(b"a\x1b[2Jb").unwrap_err().contains("control"));
    }

    #[test]
    fn a_marker_arrives_and_garbage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let rec = dir.path().join("r.flr");
        let server = MarkServer::start_in(dir.path(), "soak", None, Some(&rec), move |t| {
            tx.send((t, std::time::Instant::now())).unwrap();
        })
        .unwrap();
        let sessions = listening(dir.path()).unwrap();
        assert_eq!(sessions.len(), 1);
        let me = choose(sessions.clone(), None).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert_eq!(
            choose(sessions.clone(), Some(rec.to_str().unwrap()))
                .unwrap()
                .pid,
            me.pid
        );
        assert!(choose(sessions, Some("1")).is_err());
        let sent = std::time::Instant::now();
        send(&me, "warmup done").unwrap();
        let (text, at) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(text, "warmup done");
        // Stamped when it arrived: after it was sent, before it was read
        // here (how soon is no test's to say).
        assert!(at >= sent && at <= std::time::Instant::now(), "{at:?}");
        // Too long, not text, nothing at all: refused, and the server goes on.
        let e = send(&me, &"x".repeat(MAX_MESSAGE + 10)).unwrap_err();
        assert!(
            format!("{e:#}").contains("refused the marker: over 4096 bytes"),
            "{e:#}"
        );
        let mut raw = UnixStream::connect(server.socket()).unwrap();
        raw.write_all(b"\xff\x00garbage").unwrap();
        raw.shutdown(std::net::Shutdown::Write).unwrap();
        let mut reply = String::new();
        raw.read_to_string(&mut reply).unwrap();
        assert_eq!(reply, "refused: not UTF-8 text\n");
        send(&me, "still here").unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)).unwrap().0,
            "still here"
        );
        assert!(rx.try_recv().is_err(), "nothing refused was passed on");
        drop(server);
        assert!(
            listening(dir.path()).unwrap().is_empty(),
            "removed when done"
        );
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    #[test]
    fn several_sessions_need_a_choice_and_stale_ones_are_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let l = |pid, target| Listening {
            pid,
            kind: "watch".into(),
            target_pid: target,
            recording: None,
            socket: dir.path().join(format!("{pid}-0.sock")),
        };
        let e = choose(vec![l(10, Some(77)), l(11, None)], None).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("say which with --to") && msg.contains("watch 10 (process 77)"),
            "{msg}"
        );
        assert_eq!(
            choose(vec![l(10, Some(77)), l(11, None)], Some("77"))
                .unwrap()
                .pid,
            10
        );
        assert!(
            choose(Vec::new(), None)
                .unwrap_err()
                .to_string()
                .contains("no flatline")
        );
        // A session whose process is gone (no socket, no /proc entry).
        std::fs::write(
            dir.path().join("4000000-0.json"),
            serde_json::to_vec(&l(4_000_000, None)).unwrap(),
        )
        .unwrap();
        assert!(listening(dir.path()).unwrap().is_empty());
        assert!(!dir.path().join("4000000-0.json").exists());
    }
}
