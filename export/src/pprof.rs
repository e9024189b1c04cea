//! Allocation sites as a pprof heap profile (`profile.proto`, gzipped): the
//! format `go tool pprof`, Pyroscope, Parca, Perfetto and speedscope read,
//! and the one Go's runtime, jemalloc_pprof and heapprofd write.
//!
//! Four sample types in Go's order: `alloc_objects`, `alloc_space`,
//! `inuse_objects`, `inuse_space`, each from a site's channels
//! (`site<N>.allocs`, `.alloc_bytes`, `.objects`, `.live`): estimates
//! scaled from the samples as the receipt scales them (a sample of `s`
//! bytes drawn every `every` bytes stands for s / (1 − e^(−s/every)) bytes).
//! A site is a stack: its frames (innermost first, as recorded) become
//! locations with a function, a file and a line each; its process is told
//! by labels (`pid`, `process`, `role`, and the run's `rank`).
//!
//! Made from a recording ([`from_recording`], `export --pprof`) or from the
//! latest values of a live stream ([`Sites::profile`], `/debug/pprof/heap`).

mod model;
pub(crate) mod proto;

pub use model::{Frame, Profile, SAMPLE_TYPES, Sample};

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use flatline_analysis::rules;
use flatline_telemetry::recording::Recording;
use flatline_telemetry::{ChannelSpec, Schema};
use prost::Message;

/// The leaves of a site's channels, in [`SAMPLE_TYPES`]' order.
const LEAVES: [&str; 4] = ["allocs", "alloc_bytes", "objects", "live"];

/// Why a profile cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PprofError {
    #[error(
        "{0} has no allocation sites: record it with `flatline watch --sites -- COMMAND` \
         (or `--sites --pid PID`, attached to a running process)"
    )]
    NoSites(String),
    #[error("no allocation site of process {pid} (the recording's sites are of {of})")]
    NoSitesOfPid { pid: u32, of: String },
}

/// The frames a site channel's labels name, innermost first: its `frames`
/// (one a line: `file:line function`, `function (file)` or `function`),
/// else its `function`, `file` and `line`.
pub fn frames(labels: &BTreeMap<String, String>) -> Vec<Frame> {
    let listed: Vec<Frame> = labels
        .get("frames")
        .map(|f| {
            f.lines()
                .filter(|l| !l.is_empty())
                .map(parse_frame)
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        return listed;
    }
    let at = |k: &str| labels.get(k).cloned().unwrap_or_default();
    vec![Frame {
        function: at("function"),
        file: at("file"),
        line: at("line").parse().unwrap_or(0),
    }]
}

/// One line of a site's `frames` label (see `flatline_telemetry::sites`).
fn parse_frame(text: &str) -> Frame {
    // `file:line function`: the first `:<digits> ` (a path may hold
    // colons, a C++ name spaces).
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(off) = text[i..].find(':') {
        let colon = i + off;
        let digits = bytes[colon + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let after = colon + 1 + digits;
        if digits > 0 && bytes.get(after) == Some(&b' ') {
            return Frame {
                function: text[after + 1..].to_owned(),
                file: text[..colon].to_owned(),
                line: text[colon + 1..after].parse().unwrap_or(0),
            };
        }
        i = colon + 1;
    }
    // `function (file)`: named, no line.
    if let Some(open) = text.rfind(" (")
        && text.ends_with(')')
    {
        return Frame {
            function: text[..open].to_owned(),
            file: text[open + 2..text.len() - 1].to_owned(),
            line: 0,
        };
    }
    Frame {
        function: text.to_owned(),
        file: String::new(),
        line: 0,
    }
}

/// A recording's or a stream's sites: where each one's four channels are,
/// and who its process is.
#[derive(Debug, Clone, Default)]
pub struct Sites {
    /// Per site: its `.live` channel's spec and the positions of its four
    /// channels in [`SAMPLE_TYPES`]' order (`None`: a recording from before
    /// the counts were kept).
    sites: Vec<(ChannelSpec, [Option<usize>; 4])>,
    /// pid → (name, role), from the process tree's channels.
    processes: HashMap<u32, (String, String)>,
    rank: Option<String>,
}

impl Sites {
    /// The sites of `schema`; `labels` are the run's (`rank`, …).
    pub fn of(schema: &Schema, labels: &BTreeMap<String, String>) -> Self {
        let mut s = Self {
            rank: labels.get("rank").cloned(),
            ..Self::default()
        };
        s.add(schema, 0);
        s
    }

    /// Takes in the channels of `schema` from position `from` on (a live
    /// stream's schema grows).
    pub fn add(&mut self, schema: &Schema, from: usize) {
        for c in schema.channels.iter().skip(from) {
            if rules::is_site_channel(&c.name) {
                let stem = c.name.strip_suffix(".live").unwrap_or(&c.name);
                let mut at = [None; 4];
                for (k, leaf) in LEAVES.iter().enumerate() {
                    at[k] = schema.index_of(&format!("{stem}.{leaf}"));
                }
                self.sites.push((c.clone(), at));
            } else if let (Some(pid), Some(name)) = (
                c.labels.get("pid").and_then(|p| p.parse().ok()),
                c.labels.get("name"),
            ) {
                let role = c.labels.get("role").cloned().unwrap_or_default();
                self.processes.insert(pid, (name.clone(), role));
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// Whether every site has its counts (recordings made before they were
    /// kept have bytes only).
    pub fn has_counts(&self) -> bool {
        self.sites
            .iter()
            .all(|(_, at)| at.iter().all(Option::is_some))
    }

    /// The pids that have sites, in order.
    pub fn pids(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self.sites.iter().filter_map(|(c, _)| pid_of(c)).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// A sample per site of `pid` (every site: `None`) from `value(channel
    /// position)` (NaN: no reading; a site then counts 0). A site whose four
    /// values are all 0 is left out.
    pub fn samples(&self, pid: Option<u32>, value: &dyn Fn(usize) -> f64) -> Vec<Sample> {
        self.sites
            .iter()
            .filter(|(c, _)| pid.is_none() || pid_of(c) == pid)
            .filter_map(|(c, at)| {
                let mut values = [0i64; 4];
                for (v, p) in values.iter_mut().zip(at) {
                    let x = p.map_or(f64::NAN, value);
                    *v = if x.is_finite() { x.round() as i64 } else { 0 };
                }
                if values == [0; 4] {
                    return None;
                }
                let pid = pid_of(c);
                let mut labels = Vec::new();
                if let Some((name, role)) = pid.and_then(|p| self.processes.get(&p)) {
                    labels.push(("process".to_owned(), name.clone()));
                    labels.push(("role".to_owned(), role.clone()));
                }
                if let Some(rank) = &self.rank {
                    labels.push(("rank".to_owned(), rank.clone()));
                }
                Some(Sample {
                    frames: frames(&c.labels),
                    pid,
                    labels,
                    values,
                })
            })
            .collect()
    }
}

impl Sites {
    /// The positions of every site's channels (to keep their latest
    /// values).
    pub fn positions(&self) -> Vec<usize> {
        self.sites
            .iter()
            .flat_map(|(_, at)| at.iter().flatten().copied())
            .collect()
    }

    /// The live profile (`/debug/pprof/heap`) from each channel's latest
    /// value (`value`, NaN where it has none or its process has ended):
    /// what is held now, what was allocated since each site's first sample.
    pub fn profile(
        &self,
        value: &dyn Fn(usize) -> f64,
        time_nanos: i64,
        duration_nanos: i64,
        period: i64,
        program: &str,
    ) -> Profile {
        let mut samples = self.samples(None, value);
        largest_first(&mut samples);
        let mut comments = vec![
            "flatline: sampled allocation sites, live: held now, allocated since each site's first sample".to_owned(),
        ];
        if !self.has_counts() {
            comments.push(ONLY_BYTES.to_owned());
        }
        Profile {
            samples,
            time_nanos,
            duration_nanos,
            period,
            comments,
            program: program.to_owned(),
        }
    }
}

/// Said where a site has no count channels (a recording from before they
/// were kept, or a sample without room for them).
const ONLY_BYTES: &str = "some sites have no counts of their blocks and allocations (recorded before flatline kept them, or when the sample had no room to spare): for those only inuse_space is measured";

/// Most held first, then by stack: a reader's top is the same each time.
fn largest_first(samples: &mut [Sample]) {
    samples.sort_by(|a, b| {
        b.values[3]
            .cmp(&a.values[3])
            .then_with(|| a.frames.cmp(&b.frames))
    });
}

fn pid_of(c: &ChannelSpec) -> Option<u32> {
    c.labels.get("pid").and_then(|p| p.parse().ok())
}

/// What part of a recording a profile covers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProfileRange {
    /// Seconds after the start (default: the start).
    pub from_s: Option<f64>,
    /// Seconds after the start (default: the end).
    pub to_s: Option<f64>,
    /// One process's sites only.
    pub pid: Option<u32>,
    /// What the live bytes and blocks gained from `from_s` to `to_s`
    /// (negative where they shrank), instead of what was held at `to_s`.
    pub growth: bool,
}

/// The profile of a recording's sites over `range`: what was held at its
/// end (or, with `growth`, what that gained since its start) and what was
/// allocated within it.
pub fn from_recording(rec: &Recording, range: ProfileRange) -> Result<Profile, PprofError> {
    let sites = Sites::of(&rec.header.schema, &rec.header.labels);
    let name = rec.path.display().to_string();
    if sites.is_empty() {
        return Err(PprofError::NoSites(name));
    }
    if let Some(pid) = range.pid
        && !sites.pids().contains(&pid)
    {
        let of: Vec<String> = sites.pids().iter().map(u32::to_string).collect();
        return Err(PprofError::NoSitesOfPid {
            pid,
            of: of.join(", "),
        });
    }
    let from_ns = (range.from_s.unwrap_or(0.0) * 1e9) as u64;
    // Without --to, the end is where the receipt's analysis ends: before
    // the job's teardown, where it frees what it held as it exits (a
    // profile of the last reading would show what survived the exit).
    let teardown = range
        .to_s
        .is_none()
        .then(|| flatline_receipt::report::analyse(rec, None).teardown_s)
        .flatten();
    let to_ns = match (range.to_s, teardown) {
        (Some(s), _) => (s * 1e9) as u64,
        (None, Some(td)) => ((td * 1e9) as u64).saturating_sub(1),
        (None, None) => u64::MAX,
    };
    // The last reading at or before a time: a site that had no channel yet
    // held under 1 MiB and counts 0.
    let last_at = |i: usize, t: u64| -> f64 {
        let n = rec.t_ns.partition_point(|&x| x <= t);
        rec.columns[i][..n]
            .iter()
            .rev()
            .find(|v| v.is_finite())
            .copied()
            .unwrap_or(0.0)
    };
    let before = (from_ns > 0).then(|| from_ns - 1);
    let value = |i: usize| {
        let end = last_at(i, to_ns);
        let start = before.map_or(0.0, |b| last_at(i, b));
        let leaf = rules::site_leaf(&rec.header.schema.channels[i].name);
        let held = matches!(leaf, Some("live" | "objects"));
        if held && !range.growth {
            end
        } else {
            end - start
        }
    };
    let mut samples = sites.samples(range.pid, &value);
    largest_first(&mut samples);
    let t_end = rec
        .t_ns
        .get(rec.t_ns.partition_point(|&x| x <= to_ns).saturating_sub(1))
        .copied()
        .unwrap_or(0);
    let mut comments = vec![format!(
        "flatline: sampled allocation sites of {}, {} s to {} s",
        name,
        secs(from_ns.min(t_end)),
        secs(t_end)
    )];
    if let Some(td) = teardown {
        comments.push(format!(
            "ends where the job's teardown began ({td:.1} s), as its receipt's analysis does"
        ));
    }
    if range.growth {
        comments.push("inuse_*: what the live bytes and blocks gained over the window".into());
    }
    if !sites.has_counts() {
        comments.push(ONLY_BYTES.into());
    }
    Ok(Profile {
        samples,
        time_nanos: (rec.header.started_unix_ms as i64) * 1_000_000 + t_end as i64,
        duration_nanos: t_end.saturating_sub(from_ns) as i64,
        period: rec
            .header
            .config
            .get("sites_every")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
        comments,
        program: program(&rec.header.config),
    })
}

/// The program a watch's `command` config runs (its first word), else "".
pub fn program(config: &BTreeMap<String, String>) -> String {
    config
        .get("command")
        .and_then(|c| c.split_whitespace().next())
        .unwrap_or_default()
        .to_owned()
}

fn secs(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e9)
}

/// `profile`, encoded and gzipped as pprof's tools read it.
pub fn encode(profile: &Profile) -> Vec<u8> {
    let raw = proto::build(profile).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    gz.write_all(&raw).expect("gzip into memory");
    gz.finish().expect("gzip into memory")
}

/// `gz` gunzipped and decoded (the tests' reader).
#[cfg(test)]
pub(crate) fn decode(gz: &[u8]) -> proto::PbProfile {
    use std::io::Read;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .expect("a gzip stream");
    proto::PbProfile::decode(raw.as_slice()).expect("a profile.proto message")
}

#[cfg(test)]
mod tests;
