//! Synthetic recordings with the shapes real runs have, for tests, demos and
//! the long-recording benchmarks (`flatline synth`).
//!
//! Channels cycle through a fixed set of shapes, each named for the real
//! channel it imitates so the analysis reads it as that kind:
//!
//! | channel            | kind    | shape |
//! |--------------------|---------|-------|
//! | `mem.rss`          | level   | flat at 2 GiB, page-quantized noise |
//! | `mem.vm_data`      | level   | a slow leak, 1 MiB an hour, with noise |
//! | `malloc.arena`     | level   | a staircase: +64 MiB every 4–8 hours |
//! | `gpu0.used`        | level   | a sawtooth: fills 2 GiB over 10 min, then frees it |
//! | `alloc.count`      | counter | ~1,000 calls a second |
//! | `proc.cpu`         | gauge   | 80–100 % |
//! | `mem.rss_anon`     | level   | flat, then from 70 % of the run a leak of 50 MiB/h |
//! | `work.steps`       | counter | 10 steps a second (the step axis) |
//! | `gpu0.temp_c`      | gauge   | 60–70 °C with a daily cycle |
//! | `synth.flat<k>`    | level   | flat at a level of its own, with noise |
//!
//! Beside them, a process tree: `tree.procs` and `tree.pss`, and data-loader
//! workers whose `pid<N>.pss` channels join the schema and end as workers
//! come and go (a new one about every hour, each living 40–80 minutes, at
//! most four at once), each with its start and exit events as a watch
//! records them. Those channels are on top of `channels`.
//!
//! The generator is deterministic for a seed and keeps nothing per sample:
//! a week at 10 Hz is written as fast as the writer encodes it.

use std::path::Path;

use super::{Event, EventKind, Header, RecordingError, RecordingWriter, WriteSummary};
use crate::{ChannelSpec, Group, Kind, MAX_CHANNELS, Sample, Schema, Unit};
use flatline_arena::workload::SplitMix64;

const MIB: f64 = 1_048_576.0;
const GIB: f64 = 1024.0 * MIB;
const HOUR: f64 = 3600.0;

/// What `flatline synth` makes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynthConfig {
    pub hours: f64,
    pub hz: f64,
    /// Channels besides the workers' (at least 1).
    pub channels: usize,
    pub seed: u64,
}

/// The shapes, in the order channels take them.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Flat,
    SlowLeak,
    Staircase,
    Sawtooth,
    Calls,
    Cpu,
    LateLeak,
    Steps,
    Temperature,
    /// A flat level of its own (the k-th).
    FlatAt(usize),
}

const FIRST: [(Shape, &str, Unit, Group, Kind); 9] = [
    (
        Shape::Flat,
        "mem.rss",
        Unit::Bytes,
        Group::Memory,
        Kind::Level,
    ),
    (
        Shape::SlowLeak,
        "mem.vm_data",
        Unit::Bytes,
        Group::Memory,
        Kind::Level,
    ),
    (
        Shape::Staircase,
        "malloc.arena",
        Unit::Bytes,
        Group::Malloc,
        Kind::Level,
    ),
    (
        Shape::Sawtooth,
        "gpu0.used",
        Unit::Bytes,
        Group::Gpu,
        Kind::Level,
    ),
    (
        Shape::Calls,
        "alloc.count",
        Unit::Count,
        Group::Allocator,
        Kind::Counter,
    ),
    (
        Shape::Cpu,
        "proc.cpu",
        Unit::Percent,
        Group::System,
        Kind::Gauge,
    ),
    (
        Shape::LateLeak,
        "mem.rss_anon",
        Unit::Bytes,
        Group::Memory,
        Kind::Level,
    ),
    (
        Shape::Steps,
        "work.steps",
        Unit::Count,
        Group::Workload,
        Kind::Counter,
    ),
    (
        Shape::Temperature,
        "gpu0.temp_c",
        Unit::Celsius,
        Group::Gpu,
        Kind::Gauge,
    ),
];

fn shapes(n: usize) -> Vec<(Shape, ChannelSpec)> {
    (0..n.max(1))
        .map(|i| match FIRST.get(i) {
            Some(&(shape, name, unit, group, kind)) => {
                (shape, ChannelSpec::new(name, unit, group).with_kind(kind))
            }
            None => {
                let k = i - FIRST.len();
                let spec = ChannelSpec::new(format!("synth.flat{k}"), Unit::Bytes, Group::Memory)
                    .with_kind(Kind::Level);
                (Shape::FlatAt(k), spec)
            }
        })
        .collect()
}

/// Noise of about unit spread (a sum of uniforms: cheap, bounded).
fn noise(rng: &mut SplitMix64) -> f64 {
    let u = |r: &mut SplitMix64| (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    u(rng) + u(rng) + u(rng) - 1.5
}

/// Rounds to whole 4 KiB pages, as RSS moves.
fn pages(v: f64) -> f64 {
    (v / 4096.0).round() * 4096.0
}

/// One worker of the process tree.
#[derive(Debug, Clone, Copy)]
struct Worker {
    pid: u32,
    /// Its channel's position in the schema.
    position: usize,
    until_s: f64,
    base: f64,
}

/// The generator's state between samples.
struct Synth {
    cfg: SynthConfig,
    rng: SplitMix64,
    shapes: Vec<(Shape, ChannelSpec)>,
    /// Times of the staircase's steps, and of the sawtooth's period.
    stairs: Vec<f64>,
    alloc_calls: f64,
    steps: f64,
    workers: Vec<Worker>,
    next_worker_s: f64,
    next_pid: u32,
}

impl Synth {
    fn value(&mut self, shape: Shape, t: f64, dt: f64) -> f64 {
        let duration = self.cfg.hours * HOUR;
        let n = noise(&mut self.rng);
        match shape {
            Shape::Flat => pages(2.0 * GIB + 64.0 * 1024.0 * n),
            Shape::SlowLeak => pages(1.2 * GIB + MIB * t / HOUR + 32.0 * 1024.0 * n),
            Shape::Staircase => {
                let up = self.stairs.partition_point(|&s| s <= t);
                512.0 * MIB + 64.0 * MIB * up as f64
            }
            Shape::Sawtooth => {
                let phase = (t % 600.0) / 600.0;
                6.0 * GIB + (2.0 * GIB * phase / MIB).floor() * MIB
            }
            Shape::Calls => {
                self.alloc_calls += (1000.0 + 100.0 * n) * dt;
                self.alloc_calls.floor()
            }
            Shape::Cpu => (90.0 + 6.0 * n).clamp(0.0, 100.0),
            Shape::LateLeak => {
                let late = (t - 0.7 * duration).max(0.0);
                pages(900.0 * MIB + 50.0 * MIB * late / HOUR + 16.0 * 1024.0 * n)
            }
            Shape::Steps => {
                self.steps += 10.0 * dt;
                self.steps.floor()
            }
            Shape::Temperature => {
                65.0 + 4.0 * (t / 86_400.0 * std::f64::consts::TAU).sin() + 0.5 * n
            }
            Shape::FlatAt(k) => {
                let level = MIB * (16u64 << (k % 8)) as f64;
                pages(level + 8.0 * 1024.0 * n)
            }
        }
    }
}

/// Writes a synthetic recording of `cfg` to `out` (never over an existing
/// file unless `force`) with `header_for`'s header for its schema.
pub fn write(
    cfg: SynthConfig,
    out: &Path,
    force: bool,
    header_for: impl FnOnce(Schema) -> Header,
) -> Result<WriteSummary, RecordingError> {
    let shapes = shapes(cfg.channels);
    let mut channels: Vec<ChannelSpec> = shapes.iter().map(|(_, c)| c.clone()).collect();
    channels
        .push(ChannelSpec::new("tree.procs", Unit::Count, Group::Memory).with_kind(Kind::Gauge));
    channels.push(ChannelSpec::new("tree.pss", Unit::Bytes, Group::Memory).with_kind(Kind::Level));
    if channels.len() > MAX_CHANNELS - 4 {
        return Err(RecordingError::BadSchema(format!(
            "{} channels (and up to 4 workers') do not fit in a sample of {MAX_CHANNELS}",
            channels.len()
        )));
    }
    let schema = Schema { channels };
    let mut w = RecordingWriter::create(out, &header_for(schema.clone()), force)?;
    let mut rng = SplitMix64::new(cfg.seed);
    let duration = cfg.hours * HOUR;
    // The staircase steps every 4–8 hours.
    let mut stairs = Vec::new();
    let mut at = 0.0;
    loop {
        at += 4.0 * HOUR + (rng.next_u64() % 4) as f64 * HOUR;
        if at >= duration {
            break;
        }
        stairs.push(at);
    }
    let mut g = Synth {
        cfg,
        rng,
        shapes,
        stairs,
        alloc_calls: 0.0,
        steps: 0.0,
        workers: Vec::new(),
        next_worker_s: 60.0,
        next_pid: 4100,
    };
    let dt = 1.0 / cfg.hz;
    let samples = (duration * cfg.hz).floor() as u64 + 1;
    let (procs_at, pss_at) = (g.shapes.len(), g.shapes.len() + 1);
    for seq in 0..samples {
        let t = seq as f64 * dt;
        // Workers leave when their time is up, and a new one joins about
        // every hour while fewer than four run.
        let leaving: Vec<usize> = g
            .workers
            .iter()
            .filter(|wk| wk.until_s <= t)
            .map(|wk| wk.position)
            .collect();
        if !leaving.is_empty() {
            w.end_channels(&leaving)?;
            for wk in g.workers.iter().filter(|wk| wk.until_s <= t) {
                w.push_event(Event {
                    t_ns: (t * 1e9).round() as u64,
                    kind: EventKind::ProcessExited {
                        pid: wk.pid,
                        name: "pt_data_worker".into(),
                        role: "worker".into(),
                    },
                })?;
            }
            g.workers.retain(|wk| wk.until_s > t);
        }
        if t >= g.next_worker_s && g.workers.len() < 4 {
            let pid = g.next_pid;
            g.next_pid += 1;
            let spec = ChannelSpec::new(format!("pid{pid}.pss"), Unit::Bytes, Group::Memory)
                .with_kind(Kind::Level)
                .with_label("pid", pid.to_string())
                .with_label("name", "pt_data_worker")
                .with_label("role", "worker");
            w.add_channels(std::slice::from_ref(&spec))?;
            w.push_event(Event {
                t_ns: (t * 1e9).round() as u64,
                kind: EventKind::ProcessStarted {
                    pid,
                    ppid: 4000,
                    name: "pt_data_worker".into(),
                    role: "worker".into(),
                },
            })?;
            let life = 40.0 * 60.0 + (g.rng.next_u64() % 2400) as f64;
            g.workers.push(Worker {
                pid,
                position: w.slots().positions() - 1,
                until_s: t + life,
                base: 300.0 * MIB + (g.rng.next_u64() % 64) as f64 * MIB,
            });
            g.next_worker_s = t + HOUR * (0.5 + (g.rng.next_u64() % 100) as f64 / 100.0);
        }
        // The writer's own map says where each channel's value goes.
        let slots = w.slots();
        let mut s = Sample::new(seq, (t * 1e9).round() as u64, slots.width());
        let mut tree = 0.0;
        for i in 0..g.shapes.len() {
            let v = g.value(g.shapes[i].0, t, dt);
            if i == 0 {
                tree += v;
            }
            if let Some(slot) = slots.slot(i) {
                s.values_mut()[slot] = v;
            }
        }
        let workers = g.workers.clone();
        for wk in &workers {
            // Copy-on-access: a worker's PSS creeps up as it touches pages.
            let v =
                pages(wk.base + 2.0 * MIB * ((t % HOUR) / HOUR) + 8.0 * 1024.0 * noise(&mut g.rng));
            tree += v;
            if let Some(slot) = slots.slot(wk.position) {
                s.values_mut()[slot] = v;
            }
        }
        for (position, v) in [(procs_at, 1.0 + workers.len() as f64), (pss_at, tree)] {
            if let Some(slot) = slots.slot(position) {
                s.values_mut()[slot] = v;
            }
        }
        w.push_sample(&s)?;
    }
    w.finish("completed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::Recording;

    fn header(schema: Schema) -> Header {
        Header::new(
            "synth",
            schema,
            Default::default(),
            Default::default(),
            Vec::new(),
        )
    }

    #[test]
    fn a_synthetic_day_has_the_shapes_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("day.flr");
        let cfg = SynthConfig {
            hours: 24.0,
            hz: 0.5,
            channels: 12,
            seed: 7,
        };
        write(cfg, &out, false, header).unwrap();
        let rec = Recording::open(&out).unwrap();
        assert_eq!(rec.tail, None);
        assert_eq!(rec.len(), 24 * 1800 + 1);
        let col = |n: &str| rec.channel(n).unwrap();
        let spread = |v: &[f64]| {
            let ok: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
            ok.iter().copied().fold(f64::MIN, f64::max)
                - ok.iter().copied().fold(f64::MAX, f64::min)
        };
        // Flat within noise; the slow leak a day's 24 MiB; the late leak
        // only after 70 % of the run.
        assert!(spread(col("mem.rss")) < 1.0 * MIB);
        let leak = col("mem.vm_data");
        let grew = leak[leak.len() - 1] - leak[0];
        assert!((20.0 * MIB..28.0 * MIB).contains(&grew), "{grew}");
        let late = col("mem.rss_anon");
        let at = |f: f64| late[(f * (late.len() - 1) as f64) as usize];
        assert!((at(0.69) - at(0.0)).abs() < 1.0 * MIB);
        assert!(at(1.0) - at(0.7) > 300.0 * MIB);
        // Steps of exactly 64 MiB, and counters that only rise.
        let stair = col("malloc.arena");
        assert!(
            stair
                .windows(2)
                .all(|w| w[1] == w[0] || w[1] - w[0] == 64.0 * MIB)
        );
        assert!(stair.last() > stair.first());
        assert!(col("alloc.count").windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(rec.header.schema.channels[11].name, "synth.flat2");
        // Workers came and went: channels that joined, and some that ended.
        let workers: Vec<usize> = (0..rec.header.schema.len())
            .filter(|&i| rec.header.schema.channels[i].name.starts_with("pid"))
            .collect();
        assert!(workers.len() >= 10, "{} workers in a day", workers.len());
        assert!(workers.iter().any(|&i| rec.lifetimes[i].until.is_some()));
        // As a watch records them: a start and an exit event per worker.
        let exits = rec
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ProcessExited { .. }))
            .count();
        let ended = workers
            .iter()
            .filter(|&&i| rec.lifetimes[i].until.is_some())
            .count();
        assert_eq!(exits, ended);
        let procs = col("tree.procs");
        assert!(procs.iter().all(|&p| (1.0..=5.0).contains(&p)));
    }

    #[test]
    fn the_same_seed_writes_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = SynthConfig {
            hours: 2.0,
            hz: 1.0,
            channels: 10,
            seed: 3,
        };
        let fixed = |s: Schema| {
            let mut h = header(s);
            h.started_unix_ms = 0;
            h
        };
        let (a, b) = (dir.path().join("a.flr"), dir.path().join("b.flr"));
        write(cfg, &a, false, fixed).unwrap();
        write(cfg, &b, false, fixed).unwrap();
        let (ra, rb) = (Recording::open(&a).unwrap(), Recording::open(&b).unwrap());
        assert_eq!(ra.columns.len(), rb.columns.len());
        for (x, y) in ra.columns.iter().zip(&rb.columns) {
            assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()));
        }
        assert_eq!(ra.t_ns, rb.t_ns);
    }
}

/// One job's ranks for `flatline synth --fleet`: a recording per rank, as
/// its watcher would write it.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetConfig {
    pub ranks: usize,
    pub hours: f64,
    pub hz: f64,
    pub seed: u64,
    /// Ranks whose `tree.pss` leaks [`FLEET_LEAK_PER_HOUR`]; the others
    /// hold.
    pub leaking: Vec<usize>,
}

/// How fast a leaking rank's `tree.pss` grows.
pub const FLEET_LEAK_PER_HOUR: f64 = 41.0 * MIB;

/// Ranks per node in a fleet (`node_rank` = rank / this).
pub const FLEET_RANKS_PER_NODE: usize = 8;

/// The channels of a fleet's rank: its process's RSS and its tree's PSS,
/// a GPU's memory, and the job's steps and loss as its output says them.
fn fleet_schema() -> Schema {
    let level = |n: &str, u| ChannelSpec::new(n, u, Group::Memory).with_kind(Kind::Level);
    Schema {
        channels: vec![
            level("mem.rss", Unit::Bytes),
            level("tree.pss", Unit::Bytes),
            ChannelSpec::new("gpu0.used", Unit::Bytes, Group::Gpu).with_kind(Kind::Level),
            ChannelSpec::new("log.step", Unit::Count, Group::StepLog).with_kind(Kind::Counter),
            ChannelSpec::new("log.loss", Unit::Count, Group::StepLog).with_kind(Kind::Gauge),
        ],
    }
}

/// Writes rank `k`'s recording of the job to `out`, with the header
/// `header_for` gives (its labels, host and start are the caller's: nodes'
/// clocks disagree by seconds). Ranks differ as real ones do: their levels
/// by a few per cent, their noise, and when their first step came; ranks in
/// [`FleetConfig::leaking`] grow.
pub fn write_rank(
    cfg: &FleetConfig,
    k: usize,
    out: &Path,
    force: bool,
    header_for: impl FnOnce(Schema) -> Header,
) -> Result<WriteSummary, RecordingError> {
    let schema = fleet_schema();
    let mut w = RecordingWriter::create(out, &header_for(schema), force)?;
    let mut rng = SplitMix64::new(cfg.seed.wrapping_mul(1_000_003).wrapping_add(k as u64));
    let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let spread = |u: f64, share: f64| 1.0 + share * (2.0 * u - 1.0);
    let rss0 = 6.0 * GIB * spread(unit(), 0.03);
    let pss0 = 9.0 * GIB * spread(unit(), 0.03);
    let gpu0 = 60.0 * GIB * spread(unit(), 0.01);
    // The first step after 20–40 s of start-up, then 2 a second.
    let first_step_s = 20.0 + 20.0 * unit();
    let leaks = cfg.leaking.contains(&k);
    let page = 4096.0;
    let dt = 1.0 / cfg.hz;
    let samples = (cfg.hours * HOUR * cfg.hz).floor() as u64 + 1;
    for seq in 0..samples {
        let t = seq as f64 * dt;
        let warm = (t / first_step_s).min(1.0);
        let steps = ((t - first_step_s).max(0.0) * 2.0).floor();
        let grown = if leaks {
            FLEET_LEAK_PER_HOUR * (t - first_step_s).max(0.0) / HOUR
        } else {
            0.0
        };
        let noise = |u: f64, mib: f64| ((2.0 * u - 1.0) * mib * MIB / page).round() * page;
        let values = [
            rss0 * warm + noise(unit(), 2.0),
            pss0 * warm + grown + noise(unit(), 4.0),
            gpu0 * warm + noise(unit(), 8.0),
            steps,
            2.5 / (1.0 + steps / 500.0) + 0.02 * unit(),
        ];
        w.push_sample(&Sample::from_values(seq, (t * 1e9).round() as u64, &values))?;
    }
    w.finish("completed")
}
