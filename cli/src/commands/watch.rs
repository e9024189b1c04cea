//! `flatline watch`: another process, by PID or started here, with its own
//! step log, in the dashboard or headless.

use std::path::PathBuf;
use std::process::{Child, Command};

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crossbeam_channel::Sender;
use flatline_telemetry::torch::TorchSeen;
use flatline_telemetry::{GrowHandle, output};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use flatline_telemetry::logfile::{self, LogFormat, LogTail};
use flatline_telemetry::recording::{Event, EventKind, RecordingSetup, event_channel};
use flatline_telemetry::{CgroupSource, Clock, SamplerConfig, SamplerExit, Target};

use crate::cli::{StepsFrom, WatchArgs};
use flatline_receipt::fmt::bytes;
use flatline_stream::session::Session;

/// How long a started command has to end after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Whether `child` ends within `limit` (polled every 20 ms; it is not reaped).
fn exited_within(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !matches!(child.try_wait(), Ok(None)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The watched process: one we were pointed at, or one we started.
struct Watched {
    pid: u32,
    child: Option<Child>,
    /// What a started command prints, passed through and read.
    output: Option<Output>,
    /// Where the allocation-site library writes its rings (`--sites`),
    /// removed when the watch ends.
    sites: Option<tempfile::TempDir>,
    /// Why `--sites` was not done, said on stderr and in the recording.
    sites_note: Option<String>,
    /// What an attach (`--pid --sites`) holds until the watch ends.
    _attached: Option<AttachedSites>,
}

/// What a watch that attached holds while it runs: the lock on the rings'
/// folder's `watch.lock`, which the attached processes try once a second
/// (released by the kernel however this process ends, so a watch killed
/// with SIGKILL is noticed too), and the library's copies made in
/// containers, removed as it ends (the processes keep their mappings).
struct AttachedSites {
    _lock: std::fs::File,
    copies: Vec<PathBuf>,
}

impl Drop for AttachedSites {
    fn drop(&mut self) {
        for c in &self.copies {
            let _ = std::fs::remove_file(c);
        }
    }
}

/// The most a watch waits, after its command ended, for readers that are
/// still reading what it printed (see `Output::settle`).
const SETTLE_MOST: Duration = Duration::from_secs(20);

/// The readers of what the job says: its printed output (a started
/// command's) and its log file; their lines go to the collector that
/// starts with the telemetry.
struct Output {
    /// The queue to the collector, until the collector starts.
    tx: Option<Sender<output::Printed>>,
    lines: Option<crossbeam_channel::Receiver<output::Printed>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    /// The printed output's counts, if it is read.
    printed: Option<Arc<output::OutputStats>>,
    /// The log, until it is followed; then its thread and stop flag.
    log: Option<LogTail>,
    log_thread: Option<(std::thread::JoinHandle<Option<String>>, Arc<AtomicBool>)>,
    log_read: Option<(LogFormat, Arc<output::OutputStats>)>,
    collector: Option<std::thread::JoinHandle<()>>,
    /// The job's logged PyTorch reserved bytes, for the GPU probe.
    torch: TorchSeen,
}

impl Output {
    fn new() -> Self {
        let (tx, rx) = output::queue();
        Self {
            tx: Some(tx),
            lines: Some(rx),
            readers: Vec::new(),
            printed: None,
            log: None,
            log_thread: None,
            log_read: None,
            collector: None,
            torch: TorchSeen::default(),
        }
    }

    /// Starts turning the lines into channels, steps and markers, and
    /// following the log.
    fn collect(&mut self, grow: GrowHandle, events: Sender<Event>, clock: Clock) -> Result<()> {
        let (Some(lines), Some(tx)) = (self.lines.take(), self.tx.take()) else {
            return Ok(());
        };
        let mut counts = Vec::new();
        if let Some(st) = &self.printed {
            counts.push(("output".to_owned(), st.clone()));
        }
        if let Some(log) = self.log.take() {
            let st = log.stats();
            counts.push(("log".to_owned(), st.clone()));
            self.log_read = Some((log.format(), st));
            let stop = Arc::new(AtomicBool::new(false));
            let h = log
                .spawn(tx, clock, logfile::POLL, stop.clone())
                .context("starting the log reader")?;
            self.log_thread = Some((h, stop));
        }
        // A job's log, when one is read, gives the steps; else what it prints.
        let output_steps = self.log_read.is_none();
        self.collector = Some(
            output::collect(
                lines,
                grow,
                events,
                output_steps,
                clock,
                counts,
                Some(self.torch.clone()),
            )
            .context("starting the output reader")?,
        );
        Ok(())
    }

    /// Waits for the last lines (the command has ended, or is being
    /// stopped) and the log's last rows while the readers still move: a
    /// reader behind a burst of output (a loaded machine) is waited for up to
    /// [`SETTLE_MOST`], and a grandchild that keeps the pipe open and quiet
    /// holds the watch for `quiet` only.
    fn settle(&mut self, quiet: Duration) {
        let started = Instant::now();
        let stats: Vec<Arc<output::OutputStats>> = (self.printed.iter().cloned())
            .chain(self.log_read.iter().map(|(_, s)| s.clone()))
            .collect();
        let moved = move || {
            stats
                .iter()
                .map(|s| {
                    s.bytes.load(Ordering::Relaxed)
                        + s.taken.load(Ordering::Relaxed)
                        + s.lines.load(Ordering::Relaxed)
                })
                .sum::<u64>()
        };
        let (mut seen, mut quiet_until) = (moved(), started + quiet);
        let mut more = move || {
            let now = Instant::now();
            let m = moved();
            if m != seen {
                (seen, quiet_until) = (m, now + quiet);
            }
            now < quiet_until && now < started + SETTLE_MOST
        };
        if let Some((h, stop)) = self.log_thread.take() {
            stop.store(true, Ordering::Relaxed);
            while !h.is_finished() && more() {
                std::thread::sleep(Duration::from_millis(10));
            }
            if h.is_finished()
                && let Ok(Some(e)) = h.join()
            {
                eprintln!("flatline: reading the log: {e}");
            }
        }
        while self.readers.iter().any(|r| !r.is_finished()) && more() {
            std::thread::sleep(Duration::from_millis(10));
        }
        while self.collector.as_ref().is_some_and(|c| !c.is_finished())
            && self
                .readers
                .iter()
                .all(std::thread::JoinHandle::is_finished)
            && more()
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the receipt's line counts (`LinesRead`) do not say.
    fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        let behind = |st: &output::OutputStats| match (
            st.dropped.load(Ordering::Relaxed),
            st.skipped_bytes.load(Ordering::Relaxed),
        ) {
            (0, 0) => String::new(),
            (n, b) => format!(
                "; the reader fell behind: {n} lines dropped, {} not read",
                bytes(b as f64)
            ),
        };
        if let Some(st) = &self.printed {
            let behind = behind(st);
            if !behind.is_empty() {
                out.push(format!("output{behind}"));
            }
        }
        if let Some((format, st)) = &self.log_read {
            let rewrites = match st.rewrites.load(Ordering::Relaxed) {
                0 => String::new(),
                n => format!(", rewritten {n}× while read"),
            };
            out.push(format!(
                "log: read as {}{rewrites}{}",
                format.name(),
                behind(st)
            ));
        }
        out
    }
}

impl Watched {
    fn alive(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => {
                std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
                    || !cfg!(target_os = "linux")
            }
        }
    }

    /// Ends a command we started that is still running when the watch ends (at
    /// `--seconds`, on Ctrl-C, or when the window closes). It gets `wait_first`
    /// to end on its own (a Ctrl-C at the terminal reaches it too), then
    /// SIGTERM, so it can save its state, then SIGKILL after [`STOP_GRACE`]: the
    /// command lives as long as its watch, as under `timeout`. Returns how it
    /// was stopped, or `None` when it ended by itself or was not ours.
    fn stop_started(&mut self, wait_first: Duration) -> Option<String> {
        let child = self.child.as_mut()?;
        let pid = child.id();
        if exited_within(child, wait_first) {
            return None;
        }
        if flatline_arena::sys::terminate(pid).is_ok() && exited_within(child, STOP_GRACE) {
            let status = child.wait().ok()?;
            return Some(format!("stopped process {pid} with SIGTERM ({status})"));
        }
        let _ = child.kill();
        let status = child.wait().ok()?;
        Some(format!(
            "stopped process {pid} with SIGKILL ({status}), {} s after SIGTERM",
            STOP_GRACE.as_secs()
        ))
    }

    /// How a command we started ended, once it has (it is reaped here; its
    /// status stays for [`Self::exit_code`]).
    fn exit_fact(&mut self, command: &[String]) -> Option<EventKind> {
        let child = self.child.as_mut()?;
        let pid = child.id();
        let status = child.try_wait().ok()??;
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            let prog = command.first().map_or("", String::as_str);
            let name = prog.rsplit('/').next().unwrap_or(prog);
            Some(flatline_telemetry::tree::exit_fact(
                pid,
                name,
                status.into_raw(),
            ))
        }
        #[cfg(not(unix))]
        {
            let _ = (pid, status, command);
            None
        }
    }

    /// When the stream could not start (`err`): a command we started that
    /// has already ended (`sh -c 'exit 7'` ends within a millisecond, before
    /// its first reading) ends the watch with its own exit code, and what it
    /// printed passed through; any other cause is the error, and a command
    /// still running is stopped. We are the command's parent, so it stays
    /// ours to reap however soon it ended: its status is never lost.
    fn before_first_reading(
        &mut self,
        err: anyhow::Error,
        args: &WatchArgs,
    ) -> Result<Option<i32>> {
        let Some(child) = self.child.as_mut() else {
            return Err(err);
        };
        let Ok(Some(status)) = child.try_wait() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err);
        };
        if let Some(o) = self.output.as_mut() {
            o.settle(Duration::from_secs(1));
        }
        let line = ended_unread(self.pid, &args.command, status);
        if args.headless {
            println!("{line}");
        } else {
            eprintln!("flatline: {line}");
        }
        Ok(self.exit_code())
    }

    /// The started command's exit code (after waiting for it), if we started one.
    fn exit_code(&mut self) -> Option<i32> {
        let status = self.child.as_mut()?.wait().ok()?;
        Some(status.code().unwrap_or_else(|| {
            // Killed by a signal: the shell's convention, 128 + signal.
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                128 + status.signal().unwrap_or(0)
            }
            #[cfg(not(unix))]
            {
                1
            }
        }))
    }
}

/// The allocation-site library (`--sites`): `FLATLINE_PRELOAD` if set,
/// else beside this program (a build's `target/<profile>/`), else in
/// `../lib/flatline/` from it (where the wheel puts it).
pub fn preload_library() -> Option<PathBuf> {
    const NAME: &str = "libflatline_preload.so";
    if let Some(p) = std::env::var_os("FLATLINE_PRELOAD") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    // A test binary runs from target/<profile>/deps/.
    [
        dir.join(NAME),
        dir.join("../lib/flatline").join(NAME),
        dir.join("..").join(NAME),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Sets `cmd` up to run with the allocation-site library preloaded, its
/// rings in a new folder; why not, where it cannot be.
fn preload(
    prog: &str,
    every: u64,
    cmd: &mut Command,
) -> std::result::Result<tempfile::TempDir, String> {
    let lib = preload_library().ok_or(
        "the allocation-site library (libflatline_preload.so) is neither beside this program nor \
         in ../lib/flatline/ (build it: cargo build --release; or set FLATLINE_PRELOAD)",
    )?;
    let existing = std::env::var("LD_PRELOAD").unwrap_or_default();
    if let Some(other) = existing.split([' ', ':']).find(|l| {
        ["jemalloc", "tcmalloc", "mimalloc"]
            .iter()
            .any(|a| l.contains(a))
    }) {
        return Err(format!(
            "the job already preloads an allocator ({other}); flatline's library would stand \
             between it and the job"
        ));
    }
    if let Some(path) = on_path(prog) {
        match exec_kind(&path) {
            ExecKind::Static => {
                return Err(format!(
                    "{} is linked statically: the dynamic loader, which preloads, never runs",
                    path.display()
                ));
            }
            ExecKind::SetId => {
                return Err(format!(
                    "{} is set-user-ID or set-group-ID: the loader ignores LD_PRELOAD for it",
                    path.display()
                ));
            }
            ExecKind::Other => {}
        }
    }
    let dir = rings_dir()?;
    let preload = if existing.trim().is_empty() {
        lib.display().to_string()
    } else {
        format!("{}:{existing}", lib.display())
    };
    cmd.env("LD_PRELOAD", preload)
        .env("FLATLINE_SITES_DIR", dir.path())
        .env("FLATLINE_SITES_EVERY", every.to_string());
    Ok(dir)
}

/// A new folder for the rings: in shared memory where there is some (the
/// rings never touch a disk).
fn rings_dir() -> std::result::Result<tempfile::TempDir, String> {
    let mut folder = tempfile::Builder::new();
    folder.prefix("flatline-sites-");
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        folder.tempdir_in(shm).or_else(|_| folder.tempdir())
    } else {
        folder.tempdir()
    }
    .map_err(|e| format!("cannot make a folder for the rings: {e}"))
}

/// `watch --pid PID --sites`: the library loaded into the running process
/// (`flatline_telemetry::attach`), its rings in a new folder. Refused, or
/// failed, the watch does not start: the process was left as it was.
/// Its descendants that run now (a DataLoader's workers, a launcher's
/// ranks), parents before children.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let ppid = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok())
            });
        if let Some(pp) = ppid {
            parent_of.push((p, pp));
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        let mut kids: Vec<u32> = parent_of
            .iter()
            .filter(|(_, pp)| *pp == p)
            .map(|(c, _)| *c)
            .collect();
        kids.sort_unstable();
        out.extend(&kids);
        frontier.extend(kids);
    }
    out
}

/// The rings' folder for an attach to `pid`: one it can reach (in its
/// container's root, where it is in one) and write (its user's, where that
/// is not this process's), with the watch's lock file in it, held.
fn attach_dir(pid: u32) -> Result<(tempfile::TempDir, std::fs::File)> {
    let dir = match flatline_telemetry::attach::reachable_folder(pid) {
        Some(folder) => tempfile::Builder::new()
            .prefix("flatline-sites-")
            .tempdir_in(&folder)
            .with_context(|| {
                format!(
                    "--sites: cannot make the rings' folder in {}",
                    folder.display()
                )
            })?,
        None => rings_dir().map_err(|e| anyhow::anyhow!("--sites: {e}"))?,
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let id = |k: &str| -> Option<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    if let (Some(uid), Some(gid)) = (id("Uid:"), id("Gid:")) {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata(dir.path()).is_ok_and(|m| m.uid() != uid) {
            // Root watching another user's process: the folder is made
            // that user's (it makes its ring there). Not permitted, the
            // attach says it could not make its ring.
            let _ = std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid));
        }
    }
    let path = dir.path().join("watch.lock");
    let lock = std::fs::File::create(&path)
        .and_then(|f| {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
            f.lock()?;
            Ok(f)
        })
        .with_context(|| format!("--sites: cannot make and lock {}", path.display()))?;
    Ok((dir, lock))
}

fn attach_sites(
    pid: u32,
    every: u64,
) -> Result<(tempfile::TempDir, AttachedSites, Option<String>)> {
    let lib = preload_library().context(
        "--sites: the allocation-site library (libflatline_preload.so) is neither beside this \
         program nor in ../lib/flatline/ (build it: cargo build --release; or set FLATLINE_PRELOAD)",
    )?;
    let (dir, lock) = attach_dir(pid)?;
    let mut held = AttachedSites {
        _lock: lock,
        copies: Vec::new(),
    };
    let done = flatline_telemetry::attach::attach(pid, &lib, dir.path(), every)
        .with_context(|| format!("--sites: cannot attach to process {pid}"))?;
    held.copies.extend(done.library_copy.clone());
    eprintln!(
        "flatline: attached to process {pid} (thread {} stopped for {} ms{}); its allocation \
         sites count from now",
        done.tid,
        done.stopped_for.as_millis(),
        if done.loaded_before {
            ", the library already loaded by an earlier attach"
        } else {
            ""
        }
    );
    // The processes under it that run now: attached too, each on its own
    // (one refused is said, and the others go on). Those it starts later
    // inherit the sampler through fork, or run a new program unsampled.
    let (mut attached, mut not) = (Vec::new(), Vec::new());
    for child in descendants(pid) {
        match flatline_telemetry::attach::attach(child, &lib, dir.path(), every) {
            Ok(d) => {
                attached.push(child.to_string());
                held.copies
                    .extend(d.library_copy.filter(|c| !held.copies.contains(c)));
            }
            Err(e) => not.push(format!("{child} ({e})")),
        }
    }
    if !attached.is_empty() {
        eprintln!(
            "flatline: attached to {} of its processes too: {}",
            attached.len(),
            attached.join(", ")
        );
    }
    let note = (!not.is_empty()).then(|| {
        format!(
            "sites: {} of process {pid}'s processes were not attached, and have no sites: {}",
            not.len(),
            not.join("; ")
        )
    });
    Ok((dir, held, note))
}

/// `prog` as the shell would find it.
fn on_path(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        return Some(PathBuf::from(prog));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

enum ExecKind {
    Static,
    SetId,
    Other,
}

/// Whether a program file can take a preload: an ELF executable with no
/// interpreter (PT_INTERP) is static; a set-ID one is refused by the loader.
fn exec_kind(path: &std::path::Path) -> ExecKind {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return ExecKind::Other;
    };
    if meta.permissions().mode() & 0o6000 != 0 {
        return ExecKind::SetId;
    }
    match flatline_telemetry::sites::elf_segments(path) {
        Some(segments) if !segments.iter().any(|s| s.kind == 3) => ExecKind::Static,
        _ => ExecKind::Other,
    }
}

/// What a started command is told when flatline reads its output: rich
/// (Lightning's RichProgressBar, many CLIs) draws a progress bar to a pipe
/// only once, at its end, so a job read through a pipe shows no steps
/// until it is over. These ask it to draw as to a terminal, as tqdm
/// already does through a pipe. A variable the user set is left as it is
/// (`TTY_INTERACTIVE=0` turns this off).
const TERMINAL_HINTS: [(&str, &str); 2] = [("TTY_COMPATIBLE", "1"), ("TTY_INTERACTIVE", "1")];

/// What the receipt says of a command that ended before flatline could
/// read it: nothing was recorded.
fn ended_unread(pid: u32, command: &[String], status: std::process::ExitStatus) -> String {
    let prog = command.first().map_or("", String::as_str);
    let name = prog.rsplit('/').next().unwrap_or(prog);
    #[cfg(unix)]
    let how = {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(c), _) => format!("exited with code {c}"),
            (None, Some(s)) => format!("was killed by signal {s}"),
            _ => status.to_string(),
        }
    };
    #[cfg(not(unix))]
    let how = status.to_string();
    format!(
        "The command ended before flatline could read it: process {pid} ({name}) {how}; nothing was recorded."
    )
}

/// Everything a watch can check before it starts a command, checked: the
/// recording's path (exists without --force, a missing or unwritable
/// folder), the exporter's port (bound here and handed on) and its
/// --web-config (read here). `--cgroup DIR` and the flags' own values
/// were checked as they were parsed. So a watch that cannot run never
/// starts the command it would have watched.
fn check_before_start(args: &WatchArgs) -> Result<Option<flatline_stream::session::Ready>> {
    use flatline_telemetry::recording::RecordingWriter;
    match &args.recording.out {
        Some(out) => RecordingWriter::check_path(out, args.recording.force)?,
        // Its name has the pid: its folder is checked now.
        None if args.headless => {
            let dir = crate::commands::soak::default_dir()?;
            RecordingWriter::check_path(&dir.join("watch-check.flr"), false)?;
        }
        None => {}
    }
    args.export.config().prepare()
}

fn start_target(args: &WatchArgs, clock: Clock) -> Result<Watched> {
    match (args.pid, args.command.split_first()) {
        (Some(_), None) if args.steps_from.is_some() => {
            bail!("--steps-from reads a started command's output: give the command after `--`")
        }
        (Some(_), None) if args.step_pattern.is_some() && args.log.is_none() => {
            bail!(
                "--step-pattern reads a started command's output or a --log: give the command after `--`, or the log"
            )
        }
        (Some(pid), None) => {
            let sites = if args.sites {
                Some(attach_sites(pid, args.sites_every)?)
            } else {
                None
            };
            let (sites, attached, note) = match sites {
                Some((d, a, n)) => (Some(d), Some(a), n),
                None => (None, None, None),
            };
            Ok(Watched {
                pid,
                child: None,
                output: None,
                sites,
                sites_note: note,
                _attached: attached,
            })
        }
        (None, Some((prog, rest))) => {
            let from = args.steps_from.unwrap_or(StepsFrom::Both);
            let (out, err) = match from {
                StepsFrom::Stdout => (true, false),
                StepsFrom::Stderr => (false, true),
                StepsFrom::Both => (true, true),
                StepsFrom::None => (false, false),
            };
            let mut cmd = Command::new(prog);
            cmd.args(rest);
            if out {
                cmd.stdout(Stdio::piped());
            }
            if err {
                cmd.stderr(Stdio::piped());
            }
            let (sites, sites_note) = if args.sites {
                match preload(prog, args.sites_every, &mut cmd) {
                    Ok(dir) => (Some(dir), None),
                    Err(why) => (
                        None,
                        Some(format!(
                            "{}{why}; watching without allocation sites",
                            flatline_analysis::reading::SITES_REFUSED
                        )),
                    ),
                }
            } else {
                (None, None)
            };
            if out || err {
                for (k, v) in TERMINAL_HINTS {
                    if std::env::var_os(k).is_none() {
                        cmd.env(k, v);
                    }
                }
            }
            // Even if flatline dies without cleaning up (SIGKILL, or Xlib ending the
            // process when the display goes away), the command does not outlive it.
            flatline_arena::sys::end_with_this_process(&mut cmd);
            let mut child = cmd.spawn().with_context(|| format!("starting {prog}"))?;
            let output = (out || err).then(|| {
                let mut o = Output::new();
                let stats = Arc::new(output::OutputStats::default());
                let tx = o.tx.clone().expect("a new output's queue");
                if let Some(out) = child.stdout.take() {
                    o.readers.extend(
                        output::pass_through(
                            "stdout",
                            out,
                            std::io::stdout(),
                            tx.clone(),
                            clock,
                            stats.clone(),
                            args.step_pattern.clone(),
                        )
                        .ok(),
                    );
                }
                if let Some(e) = child.stderr.take() {
                    o.readers.extend(
                        output::pass_through(
                            "stderr",
                            e,
                            std::io::stderr(),
                            tx,
                            clock,
                            stats.clone(),
                            args.step_pattern.clone(),
                        )
                        .ok(),
                    );
                }
                o.printed = Some(stats);
                o
            });
            Ok(Watched {
                pid: child.id(),
                child: Some(child),
                output,
                sites,
                sites_note,
                _attached: None,
            })
        }
        (None, None) => bail!("say what to watch: --pid PID, or a command after `--`"),
        (Some(_), Some(_)) => bail!("give either --pid or a command after `--`, not both"),
    }
}

/// The job's log, once it exists and says what it is, ready to follow.
fn follow_log(args: &WatchArgs, target: &mut Watched) -> Result<()> {
    let Some(path) = &args.log else {
        return Ok(());
    };
    if !path.exists() {
        eprintln!("flatline: waiting for {} …", path.display());
    }
    let tail = LogTail::wait_for(
        path,
        Duration::from_secs_f64(args.log_wait_s),
        args.step_pattern.clone(),
        || target.alive(),
    )?;
    target.output.get_or_insert_with(Output::new).log = Some(tail);
    Ok(())
}

/// What the recording's header says about this watch, window or headless.
fn setup(args: &WatchArgs, pid: u32) -> RecordingSetup {
    let mut setup = RecordingSetup::new("watch");
    setup.redact_host = args.recording.redact_host;
    setup
        .watch(pid, &args.command, args.log.as_deref())
        .hz(args.hz);
    if let Some(s) = args.seconds {
        setup.set("seconds", s);
    }
    if let Some(dir) = &args.cgroup {
        setup.set("cgroup", dir.display());
    }
    if args.sites && !args.command.is_empty() {
        // A heap profile's `period` (`export --pprof`).
        setup.set("sites_every", args.sites_every);
    }

    // Where the job sits among ranks and nodes: a command started here has
    // this environment; a process watched by pid, its own, where readable.
    use flatline_telemetry::recording::labels;
    let env = if args.command.is_empty() {
        labels::of_process(pid).unwrap_or_else(|e| {
            setup.notes.push(format!(
                "the job's labels (RANK, …) could not be read from /proc/{pid}/environ: {e}"
            ));
            Default::default()
        })
    } else {
        labels::from_env(std::env::vars())
    };
    setup.labels = args.labels.over(env);
    setup
}

fn sampler_config(
    args: &WatchArgs,
    target: &Watched,
    clock: Clock,
    events: Sender<Event>,
) -> SamplerConfig {
    SamplerConfig {
        torch: target.output.as_ref().map(|o| o.torch.clone()),
        hz: args.hz,
        target: Target::Pid(target.pid),
        clock: Some(clock),
        tree: !args.no_tree,
        per_process: !args.no_per_process,
        events: Some(events),
        sites: target.sites.as_ref().map(|d| d.path().to_owned()),
        cgroup: args
            .cgroup
            .clone()
            .map_or(CgroupSource::OfTarget, CgroupSource::Dir),
        ..SamplerConfig::default()
    }
}

/// The watch's window has closed (or failed): a command we started with it
/// is stopped (after a Ctrl-C, which the command got too, it first has time
/// to end on its own: a trainer may be saving a checkpoint), and the watch's
/// exit code is the command's, or 130/0 when we stopped it.
fn window_closed(shown: Result<crate::Closed>, target: &mut Watched) -> Result<Option<i32>> {
    let by_signal = matches!(shown, Ok(crate::Closed::BySignal));
    let stopped = target.stop_started(if by_signal {
        STOP_GRACE
    } else {
        Duration::ZERO
    });
    if let Some(how) = &stopped {
        eprintln!("flatline: the window closed; {how}");
    }
    shown?;
    Ok(match (&stopped, by_signal) {
        (Some(_), true) => Some(130),
        (Some(_), false) => Some(0),
        (None, _) => target.exit_code(),
    })
}

/// A headless watch, until it ends: the job exits (its exit fact and
/// `TargetExited` recorded), Ctrl-C, `--seconds`, or a write fault when the
/// policy is to stop. Says which.
fn wait_headless(
    session: &Session,
    target: &mut Watched,
    args: &WatchArgs,
) -> Result<&'static str> {
    let stop = crate::commands::soak::interrupt_flag()?;
    let start = Instant::now();
    let limit = args.seconds.map(Duration::from_secs_f64);
    let mut faults = flatline_stream::session::FaultWatch::default();
    Ok(loop {
        std::thread::sleep(Duration::from_millis(100));
        if faults.check(session, args.recording.on_write_error) {
            break "write failed";
        }
        if session.sampler_finished() {
            if let Some(fact) = target.exit_fact(&args.command) {
                session.event(fact);
            }
            session.event(EventKind::TargetExited { pid: target.pid });
            break "target exited";
        }
        if stop.load(Ordering::Relaxed) {
            break "interrupted";
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            break "completed";
        }
    })
}

/// What the receipt of a headless watch says after its table: the
/// command's output read, a job that ended before its first reading, an
/// exit, how a started command was stopped.
fn print_end_notes(
    target: &mut Watched,
    args: &WatchArgs,
    end: &flatline_stream::session::SessionEnd,
    stopped: Option<&str>,
    interrupted: bool,
) {
    if let Some(o) = &target.output {
        for line in o.summary() {
            println!("  {line}");
        }
    }
    if end.recorder.write.samples == 0
        && let (Some(status), SamplerExit::TargetExited { .. }) = (
            target
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten()),
            &end.exit,
        )
    {
        println!("  {}", ended_unread(target.pid, &args.command, status));
    }
    if let SamplerExit::TargetExited { pid } = end.exit
        && stopped.is_none()
    {
        println!("  process {pid} exited; the recording covers it to the end");
    }
    if let Some(how) = stopped {
        let why = if interrupted {
            "interrupted"
        } else {
            "--seconds reached"
        };
        println!("  {why}: {how}");
    }
}

/// Runs the watch; returns the started command's exit code, if one was started
/// and ended on its own (0 when flatline stopped it because the watch ended).
pub fn run(args: &WatchArgs, viewer: &dyn crate::Viewer) -> Result<Option<i32>> {
    if !args.headless {
        viewer.check_display()?;
    }
    // One clock for the samples, the log's step events and the command's
    // printed lines, which go straight to whoever records (the recorder
    // thread, or the window).
    let ready = check_before_start(args)?;
    let export = |pid: u32| {
        args.export.export(pid).map(|mut e| {
            e.ready.clone_from(&ready);
            e
        })
    };
    let clock = Clock::start();
    let mut target = start_target(args, clock)?;
    let events = event_channel();
    let printed_events = events.0.clone();
    if let Some(why) = &target.sites_note {
        eprintln!("flatline: {why}");
        let _ = events.0.try_send(Event {
            t_ns: clock.now_ns(),
            kind: EventKind::Note(why.clone()),
        });
    }
    if let Err(e) = follow_log(args, &mut target) {
        // Never leave a started command running behind an error.
        return target.before_first_reading(e, args);
    }
    // `flatline mark TEXT` reaches this watch while it runs.
    let mark = |recording: Option<&std::path::Path>| {
        let to = events.0.clone();
        flatline_stream::mark::listen("watch", Some(target.pid), recording, move |text| {
            let _ = to.try_send(Event {
                t_ns: clock.now_ns(),
                kind: EventKind::Marker(text),
            });
        })
    };
    if !args.headless {
        let _marks = mark(args.recording.out.as_deref());
        let started = flatline_stream::source::WatchSource::start(
            target.pid,
            sampler_config(args, &target, clock, events.0.clone()),
            Vec::new(),
            events,
            setup(args, target.pid),
            args.recording.out.as_deref(),
            args.recording.force,
            args.recording.on_write_error,
            export(target.pid),
        );
        let (src, store) = match started {
            Ok(s) => s,
            Err(e) => return target.before_first_reading(e, args),
        };
        if let Some(o) = target.output.as_mut() {
            o.collect(src.grow(), printed_events, clock)?;
        }
        let shown = viewer.show(crate::viewer::Show {
            title: format!("flatline — watching {}", target.pid),
            size: [1600.0, 1000.0],
            window: args.window.clone(),
            screenshot: None,
            shown: crate::viewer::Shown::Source {
                source: Box::new(src),
                store,
            },
        });
        return window_closed(shown, &mut target);
    }

    let out = match &args.recording.out {
        Some(p) => p.clone(),
        None => crate::commands::soak::default_path(&format!("watch-{}", target.pid))?,
    };
    let marks = mark(Some(&out));
    let started = Session::start_with(
        setup(args, target.pid),
        sampler_config(args, &target, clock, events.0.clone()),
        Vec::new(),
        events,
        &out,
        args.recording.force,
        export(target.pid),
    );
    let session = match started {
        Ok(s) => s,
        Err(e) => {
            drop(marks);
            return target.before_first_reading(e, args);
        }
    };
    if let Some(o) = target.output.as_mut() {
        o.collect(session.grow(), printed_events, clock)?;
    }
    flatline_telemetry::alloc::mark_observer_thread();
    let ended_by = wait_headless(&session, &mut target, args)?;
    let interrupted = ended_by == "interrupted";
    let write_failed = ended_by == "write failed";
    // A command we started is stopped before the recording ends, so that
    // what it prints while it stops (a trainer's last step) is recorded; after
    // a Ctrl-C, which it got too, it first has time to end on its own. A
    // watch whose own disk filled never stops the job.
    let stopped = if ended_by == "target exited" || write_failed {
        None
    } else {
        target.stop_started(if interrupted {
            STOP_GRACE
        } else {
            Duration::ZERO
        })
    };
    // The command's last lines belong to the recording: its pipes close as
    // it ends, and the readers and the collector finish what they hold.
    if let Some(o) = target.output.as_mut()
        && !write_failed
    {
        o.settle(Duration::from_secs(1));
    }
    drop(marks);
    let end = session.finish_with(ended_by, ended_by == "target exited")?;
    let rec = crate::commands::report::open(&out)?;
    let receipt = crate::commands::report::analyse(&rec, None);
    print!("{}", crate::commands::report::text_report(&rec, &receipt));
    print_end_notes(&mut target, args, &end, stopped.as_deref(), interrupted);
    println!(
        "\n  wrote {} ({} samples, {})",
        out.display(),
        end.recorder.write.samples,
        bytes(end.recorder.write.bytes as f64)
    );
    if write_failed && target.child.is_some() {
        // The job runs on, its output still passed through, until it ends.
        println!("  the recording stopped (--on-write-error stop); the command runs on");
        let code = target.exit_code();
        flatline_stream::session::fault_outcome(&end.recorder.faults)?;
        return Ok(code);
    }
    flatline_stream::session::fault_outcome(&end.recorder.faults)?;
    if stopped.is_some() {
        // Stopped by us: the watch did what was asked (130: as interrupted).
        return Ok(Some(if interrupted { 130 } else { 0 }));
    }
    Ok(target.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader still taking a burst of output when its command ended is
    /// waited for past the quiet bound while it moves; one that holds a
    /// pipe open and reads nothing (a grandchild's) holds the watch for the
    /// quiet bound only.
    #[test]
    fn settling_waits_for_a_reader_that_moves_and_not_for_a_quiet_one() {
        let quiet = Duration::from_millis(500);
        let mut o = Output::new();
        let stats = Arc::new(output::OutputStats::default());
        o.printed = Some(stats.clone());
        // Twenty steps of 75 ms: three times the quiet bound in all, each
        // step a seventh of it (a loaded machine's late wake-ups included).
        o.readers.push(std::thread::spawn(move || {
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(75));
                stats.taken.fetch_add(64 << 10, Ordering::Relaxed);
            }
        }));
        o.settle(quiet);
        assert!(o.readers[0].is_finished(), "the moving reader was left");

        let mut o = Output::new();
        o.printed = Some(Arc::new(output::OutputStats::default()));
        let (hold, held) = crossbeam_channel::bounded::<()>(0);
        o.readers.push(std::thread::spawn(move || {
            let _ = held.recv();
        }));
        let t0 = Instant::now();
        o.settle(quiet);
        assert!(!o.readers[0].is_finished());
        assert!(
            t0.elapsed() < SETTLE_MOST / 2,
            "a quiet reader held the watch {:?}",
            t0.elapsed()
        );
        drop(hold);
    }
}
