//! What the kernel's log says of the OOM killer, read from `/dev/kmsg`
//! where this process may (root, or `kernel.dmesg_restrict=0` with the
//! file readable).
//!
//! The log is opened at its end when the watch starts, so only what happens
//! during the watch is read; each slow tick reads every record that came,
//! without blocking. A kill is logged as
//!
//! ```text
//! oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/job,task_memcg=/job,task=python,pid=1321,uid=0
//! Memory cgroup out of memory: Killed process 1321 (python) total-vm:1234kB, anon-rss:1000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:10kB oom_score_adj:0
//! ```
//!
//! and becomes one [`EventKind::Fact`] of kind `kernel_oom_kill`, about
//! that pid, with its sizes in bytes (`total_vm`, `anon_rss`, `file_rss`,
//! `shmem_rss`) and, from the `oom-kill:` line before it, the constraint
//! and the cgroup in its text. Every kill the kernel logs is kept, the
//! tree's or not: the analysis tells which were the job's. The fact is
//! stamped when read (within a slow tick, 0.5 s by default, of the log).

use std::io::{ErrorKind, Read};

use crossbeam_channel::Sender;
use flatline_format::{Event, EventKind};

use super::{ChannelSpec, Clock, Probe, ProbeError, Unavailable};

/// One kill, as the kernel logged it.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelKill {
    pub pid: u32,
    pub name: String,
    /// `CONSTRAINT_MEMCG` (a cgroup's limit), `CONSTRAINT_NONE` (the host's
    /// memory), … where the `oom-kill:` line said.
    pub constraint: Option<String>,
    /// The cgroup whose limit was reached (`oom_memcg`), where said.
    pub memcg: Option<String>,
    /// Sizes at the kill, in bytes.
    pub total_vm: f64,
    pub anon_rss: f64,
    pub file_rss: f64,
    pub shmem_rss: f64,
    /// Whether a cgroup's limit (not the host's memory) was reached.
    pub in_cgroup: bool,
}

impl KernelKill {
    /// The fact a recording keeps.
    pub fn fact(&self) -> EventKind {
        let whose = match (&self.constraint, &self.memcg) {
            (_, Some(cg)) if self.in_cgroup => format!("the limit of cgroup {cg}"),
            (Some(c), _) if c == "CONSTRAINT_MEMCG" || self.in_cgroup => {
                "a cgroup's limit".to_owned()
            }
            (Some(c), _) if c != "CONSTRAINT_NONE" => format!("a limit ({c})"),
            _ if self.in_cgroup => "a cgroup's limit".to_owned(),
            _ => "the host's memory".to_owned(),
        };
        EventKind::fact(
            "kernel_oom_kill",
            format!(
                "the kernel's OOM killer killed process {} ({}) at {:.1} MiB resident, reaching {whose}",
                self.pid,
                self.name,
                (self.anon_rss + self.file_rss + self.shmem_rss) / f64::from(1u32 << 20),
            ),
            &[
                ("total_vm", self.total_vm),
                ("anon_rss", self.anon_rss),
                ("file_rss", self.file_rss),
                ("shmem_rss", self.shmem_rss),
                ("in_cgroup", f64::from(u8::from(self.in_cgroup))),
            ],
        )
        .of_pid(self.pid)
    }
}

/// The message of one `/dev/kmsg` record (`pri,seq,usec,flags;message`,
/// continuation lines dropped).
pub fn record_message(record: &str) -> &str {
    let first = record.lines().next().unwrap_or("");
    first.split_once(';').map_or(first, |(_, m)| m)
}

/// `key:1234kB` → bytes.
fn kb(text: &str, key: &str) -> Option<f64> {
    let at = text.find(key)? + key.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse::<f64>().ok().map(|v| v * 1024.0)
}

/// Reads kill lines one message at a time; an `oom-kill:` line is kept
/// for the `Killed process` line that follows it.
#[derive(Debug, Default)]
pub struct KillParser {
    context: Option<(Option<String>, Option<String>, Option<u32>)>,
}

impl KillParser {
    /// The kill a message completes, if it does.
    pub fn message(&mut self, msg: &str) -> Option<KernelKill> {
        let msg = msg.trim();
        if let Some(rest) = msg.strip_prefix("oom-kill:") {
            let field = |k: &str| {
                rest.split(',')
                    .find_map(|f| f.strip_prefix(k))
                    .map(str::to_owned)
            };
            self.context = Some((
                field("constraint="),
                field("oom_memcg="),
                field("pid=").and_then(|p| p.parse().ok()),
            ));
            return None;
        }
        let at = msg.find("Killed process ")?;
        let rest = &msg[at + "Killed process ".len()..];
        let (pid, rest) = rest.split_once(' ')?;
        let pid: u32 = pid.parse().ok()?;
        let open = rest.find('(')?;
        let close = rest.find(") ")?;
        let name = rest.get(open + 1..close)?.to_owned();
        let (constraint, memcg) = match self.context.take() {
            Some((c, m, Some(p))) if p == pid => (c, m),
            _ => (None, None),
        };
        let in_cgroup = msg[..at].contains("Memory cgroup")
            || constraint.as_deref() == Some("CONSTRAINT_MEMCG");
        Some(KernelKill {
            pid,
            name,
            constraint,
            memcg,
            total_vm: kb(rest, "total-vm:").unwrap_or(f64::NAN),
            anon_rss: kb(rest, "anon-rss:").unwrap_or(f64::NAN),
            file_rss: kb(rest, "file-rss:").unwrap_or(f64::NAN),
            shmem_rss: kb(rest, "shmem-rss:").unwrap_or(f64::NAN),
            in_cgroup,
        })
    }
}

/// A probe without channels: it reads the kernel's log on the slow thread
/// and sends the kills it finds as events.
pub struct KmsgProbe {
    file: std::fs::File,
    parser: KillParser,
    events: Sender<Event>,
    clock: Clock,
    buf: Vec<u8>,
    /// The watched tree's pids as the tree probe tells them, and every pid
    /// ever seen in it: a kill of another process of the host is marked as
    /// that, never as the job's.
    tree: Option<(super::tree::TreePids, std::collections::HashSet<u32>)>,
}

impl std::fmt::Debug for KmsgProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsgProbe").finish_non_exhaustive()
    }
}

impl KmsgProbe {
    /// Opens `/dev/kmsg` at its end; unavailable, saying why, where it
    /// cannot be read.
    pub fn new(events: Sender<Event>, clock: Clock) -> Result<Self, Unavailable> {
        Self::open(std::path::Path::new("/dev/kmsg"), events, clock)
    }

    /// As [`KmsgProbe::new`], from another file (tests).
    pub fn open(
        path: &std::path::Path,
        events: Sender<Event>,
        clock: Clock,
    ) -> Result<Self, Unavailable> {
        use std::io::{Seek, SeekFrom};
        #[cfg(target_os = "linux")]
        use std::os::unix::fs::OpenOptionsExt;
        let na = |e: std::io::Error| {
            Unavailable::new(
                "kmsg",
                format!(
                    "cannot read the kernel's log ({}: {e}): OOM kills are told by the cgroup's count and the job's output only",
                    path.display()
                ),
            )
        };
        let mut o = std::fs::OpenOptions::new();
        o.read(true);
        #[cfg(target_os = "linux")]
        o.custom_flags(libc::O_NONBLOCK);
        let mut file = o.open(path).map_err(na)?;
        file.seek(SeekFrom::End(0)).map_err(na)?;
        Ok(Self {
            file,
            parser: KillParser::default(),
            events,
            clock,
            // The kernel hands out one record a read, at most 8 KiB long.
            buf: vec![0; 8192],
            tree: None,
        })
    }

    /// Marks a kill of a process never seen in the tree `pids` holds as
    /// outside the job.
    pub fn with_tree(mut self, pids: super::tree::TreePids) -> Self {
        self.tree = Some((pids, std::collections::HashSet::new()));
        self
    }

    /// Reads every record that came since the last call.
    fn drain(&mut self) {
        if let Some((pids, seen)) = &mut self.tree {
            let now = pids
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.extend(now.iter().copied());
        }
        // A bounded number a tick, so a flood of log lines cannot hold the
        // slow thread.
        for _ in 0..4096 {
            match self.file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    let text = String::from_utf8_lossy(&self.buf[..n]);
                    if let Some(kill) = self.parser.message(record_message(&text)) {
                        let t_ns = self.clock.now_ns();
                        let _ = self.events.try_send(Event {
                            t_ns,
                            kind: kill.fact(),
                        });
                        // On the markers' lane too; a process of the host
                        // the tree never held is said to be no part of it
                        // (a kill in another container is no death of the
                        // job's, though it tells of the host's memory).
                        let outside = self
                            .tree
                            .as_ref()
                            .is_some_and(|(_, seen)| !seen.contains(&kill.pid));
                        let _ = self.events.try_send(Event {
                            t_ns,
                            kind: EventKind::Marker(format!(
                                "OOM kill{}: process {} ({})",
                                if outside {
                                    " outside the job's tree"
                                } else {
                                    ""
                                },
                                kill.pid,
                                kill.name
                            )),
                        });
                    }
                }
                // Records overwritten before they were read: go on from the
                // oldest left.
                Err(e) if e.raw_os_error() == Some(32) => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
}

impl Probe for KmsgProbe {
    fn name(&self) -> &'static str {
        "kmsg"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        Vec::new()
    }

    fn read(&mut self, _out: &mut [f64]) -> Result<(), ProbeError> {
        self.drain();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of a real kernel's cgroup OOM kill (6.x), and the host
    /// wording of older kernels.
    #[test]
    fn a_kill_is_read_with_its_sizes_constraint_and_cgroup() {
        let mut p = KillParser::default();
        let lines = [
            "6,1234,5000000,-;python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
            "6,1235,5000001,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/job/oomtest,task_memcg=/job/oomtest,task=python3,pid=1321,uid=0",
            "3,1236,5000002,-;Memory cgroup out of memory: Killed process 1321 (python3) total-vm:1187636kB, anon-rss:1048576kB, file-rss:4096kB, shmem-rss:0kB, UID:0 pgtables:2200kB oom_score_adj:0\n SUBSYSTEM=memory",
        ];
        let found: Vec<KernelKill> = lines
            .iter()
            .filter_map(|l| p.message(record_message(l)))
            .collect();
        assert_eq!(found.len(), 1);
        let k = &found[0];
        assert_eq!((k.pid, k.name.as_str()), (1321, "python3"));
        assert_eq!(k.constraint.as_deref(), Some("CONSTRAINT_MEMCG"));
        assert_eq!(k.memcg.as_deref(), Some("/job/oomtest"));
        assert_eq!(k.anon_rss, 1048576.0 * 1024.0);
        assert_eq!(k.file_rss, 4096.0 * 1024.0);
        assert!(k.in_cgroup);
        let EventKind::Fact {
            kind, pid, text, ..
        } = k.fact()
        else {
            panic!("a fact")
        };
        assert_eq!((kind.as_str(), pid), ("kernel_oom_kill", Some(1321)));
        assert!(text.contains("cgroup /job/oomtest"), "{text}");

        let host = "Out of memory: Killed process 77 (trainer) total-vm:100kB, anon-rss:50kB, file-rss:0kB, shmem-rss:8kB";
        let k = p.message(host).unwrap();
        assert_eq!(
            (k.pid, k.in_cgroup, k.constraint.clone()),
            (77, false, None)
        );
        assert_eq!(k.shmem_rss, 8192.0);
        assert!(p.message("Killed process x (y)").is_none());
        assert!(p.message("some other line").is_none());
    }

    /// The probe reads what is written after it opened, not before.
    #[test]
    fn the_probe_reads_only_what_came_after_it_opened() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            tmp.path(),
            "Out of memory: Killed process 5 (old) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n",
        )
        .unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut p = KmsgProbe::open(tmp.path(), tx, Clock::start()).unwrap();
        p.read(&mut []).unwrap();
        assert!(rx.try_recv().is_err(), "the old kill is not read");
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(tmp.path())
            .unwrap();
        write!(
            f,
            "3,9,9,-;Out of memory: Killed process 6 (new) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB"
        )
        .unwrap();
        p.read(&mut []).unwrap();
        let e = rx.try_recv().unwrap();
        assert!(
            matches!(e.kind, EventKind::Fact { pid: Some(6), .. }),
            "{e:?}"
        );
        let marker = rx.try_recv().unwrap();
        assert_eq!(
            marker.kind,
            EventKind::Marker("OOM kill: process 6 (new)".into())
        );
    }

    /// With the tree's pids told, a kill of a process the tree ever held is
    /// the job's marker; one of another process of the host says it is not.
    #[test]
    fn a_kill_outside_the_tree_is_marked_as_that() {
        use std::io::Write;
        let tmp = tempfile::NamedTempFile::new().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let pids = super::super::tree::TreePids::default();
        pids.lock().unwrap().push(6);
        let mut p = KmsgProbe::open(tmp.path(), tx, Clock::start())
            .unwrap()
            .with_tree(pids.clone());
        p.read(&mut []).unwrap();
        // The tree saw 6 gone before the log's line was read.
        pids.lock().unwrap().clear();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(tmp.path())
            .unwrap();
        let kill = |pid: u32| {
            format!(
                "3,9,9,-;Out of memory: Killed process {pid} (x) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB"
            )
        };
        write!(f, "{}", kill(6)).unwrap();
        p.read(&mut []).unwrap();
        write!(f, "{}", kill(7)).unwrap();
        p.read(&mut []).unwrap();
        let markers: Vec<String> = rx
            .try_iter()
            .filter_map(|e| match e.kind {
                EventKind::Marker(m) => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!(
            markers,
            [
                "OOM kill: process 6 (x)",
                "OOM kill outside the job's tree: process 7 (x)"
            ]
        );
    }
}
