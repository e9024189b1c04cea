//! Channels: what a value measures (unit), where it is shown (group) and what
//! kind of quantity it is (kind).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Longest channel name a recording may carry, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// What a channel's values measure. Values are stored in base units; the UI
/// chooses how to show them (MiB, µs, …) and says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    /// 2^20 bytes: step logs that report memory in "MB" mean MiB.
    Mebibytes,
    /// A number of things (allocations, faults, threads, operations).
    Count,
    Percent,
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    Celsius,
    /// Events per second.
    PerSecond,
    /// A plain number with no unit (a loss, a ratio).
    Number,
}

impl Unit {
    /// True for units of memory.
    pub fn is_bytes(self) -> bool {
        matches!(self, Unit::Bytes | Unit::Mebibytes)
    }
}

/// Which family of channels a channel belongs to, for grouping in views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// Process memory and page tables (`/proc`).
    Memory,
    /// flatline's counting allocator.
    Allocator,
    /// glibc malloc statistics.
    Malloc,
    Gpu,
    /// Progress of the measured workload.
    Workload,
    /// The host as a whole.
    System,
    /// Columns of a training job's own step log.
    StepLog,
    /// flatline's own health: drops, sampling cost.
    Telemetry,
}

/// What kind of quantity a channel is; it decides how a channel is analysed.
///
/// | kind | meaning | built-in channels |
/// |---|---|---|
/// | `level` | a quantity in use now: growth verdicts, 24 h projection, time to the limit | `mem.rss`, `mem.vm_data`, `mem.vm_size`, `mem.vm_pte`, `mem.rss_anon`, `mem.rss_file`, `mem.swap`, `alloc.live`, `malloc.arena`, `malloc.mmap`, `malloc.in_use`, `malloc.free`, `gpu<i>.used`, `gpu<i>.proc_used`, `tree.rss`, `tree.pss`, `tree.uss`, `tree.swap`, `pid<N>.rss`, `pid<N>.pss`, `pid<N>.uss`, `cgroup.current`, memory columns of a step log (`log.*_mb`, `log.*_bytes`) |
/// | `peak` | a high-water mark: it only rises | `mem.hwm`, `alloc.peak` |
/// | `counter` | cumulative: read as a rate | `mem.minflt`, `mem.majflt`, `alloc.count`, `alloc.frees`, `work.ops`, `work.steps`, `work.tokens`, `ingest.batches`, `telemetry.dropped`, `telemetry.sampler_allocs`, `telemetry.allocs`, `tree.skipped`, `log.step`, `log.tokens` |
/// | `gauge` | everything else: %, °C, rates, latencies, loss, capacities | `proc.threads`, `proc.cpu`, `sys.cpu`, `sys.mem_total`, `sys.mem_available`, `tree.procs`, `cgroup.max`, `gpu<i>.total`, `gpu<i>.util`, `gpu<i>.temp_c`, `alloc.rate`, `work.ops_per_s`, `ingest.fill_ns_p50`, `ingest.fill_ns_p99`, `telemetry.read_ns`, other `log.*` columns |
///
/// Recordings of format v1 carry no kinds; [`Kind::infer`] gives them one
/// from the channel's name and unit by the rules of this table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Level,
    Peak,
    Counter,
    Gauge,
}

/// Cumulative counts among the built-in channels and step-log columns.
const COUNTERS: [&str; 13] = [
    "mem.minflt",
    "mem.majflt",
    "alloc.count",
    "alloc.frees",
    "work.ops",
    "work.steps",
    "work.tokens",
    "ingest.batches",
    "telemetry.dropped",
    "telemetry.sampler_allocs",
    "telemetry.allocs",
    "log.step",
    "log.tokens",
];

impl Kind {
    /// The kind a channel of this name and unit has by the table above.
    pub fn infer(name: &str, unit: Unit) -> Kind {
        let leaf = name.rsplit('.').next().unwrap_or(name);
        if COUNTERS.contains(&name) || leaf == "steps" || leaf == "tokens" || leaf == "step" {
            Kind::Counter
        } else if leaf == "hwm" || leaf == "peak" || leaf.ends_with("_peak") {
            Kind::Peak
        } else if unit.is_bytes()
            && leaf != "total"
            && leaf != "mem_total"
            && leaf != "mem_available"
        {
            Kind::Level
        } else {
            Kind::Gauge
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Level => "level",
            Kind::Peak => "peak",
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// Name, unit, group and kind of one channel, e.g. `mem.rss` in bytes, group
/// memory, a level. `labels` carry what else a reader needs to know (a
/// process channel's `pid`, `name` and `role`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ChannelSpecWire")]
pub struct ChannelSpec {
    pub name: String,
    pub unit: Unit,
    pub group: Group,
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A channel as stored: format v1 has no `kind`, and one is inferred.
#[derive(Deserialize)]
struct ChannelSpecWire {
    name: String,
    unit: Unit,
    group: Group,
    #[serde(default)]
    kind: Option<Kind>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

impl From<ChannelSpecWire> for ChannelSpec {
    fn from(w: ChannelSpecWire) -> Self {
        let kind = w.kind.unwrap_or_else(|| Kind::infer(&w.name, w.unit));
        Self {
            name: w.name,
            unit: w.unit,
            group: w.group,
            kind,
            labels: w.labels,
        }
    }
}

impl ChannelSpec {
    /// A channel whose kind follows from its name and unit ([`Kind::infer`]).
    pub fn new(name: impl Into<String>, unit: Unit, group: Group) -> Self {
        let name = name.into();
        let kind = Kind::infer(&name, unit);
        Self {
            name,
            unit,
            group,
            kind,
            labels: BTreeMap::new(),
        }
    }

    /// The same channel, of kind `kind`.
    pub fn with_kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// The same channel, with a label.
    pub fn with_label(mut self, key: &str, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// Channels that count training steps: the built-in workloads' own first,
/// then a step log's. The first one a stream has is its step axis.
pub const STEP_CHANNELS: [&str; 2] = ["work.steps", "log.step"];

/// Channels that count training tokens, in the same order.
pub const TOKEN_CHANNELS: [&str; 2] = ["work.tokens", "log.tokens"];

/// The channels of a stream, in the order of a sample's values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    pub channels: Vec<ChannelSpec>,
}

impl Schema {
    /// Position of the channel called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.channels.iter().position(|c| c.name == name)
    }

    /// Position of the first of `names` that this schema has (see [`STEP_CHANNELS`]).
    pub fn index_of_first(&self, names: &[&str]) -> Option<usize> {
        names.iter().find_map(|n| self.index_of(n))
    }

    pub fn len(&self) -> usize {
        self.channels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}

/// A probe that could not work here, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unavailable {
    pub probe: String,
    pub reason: String,
}

impl Unavailable {
    pub fn new(probe: &str, reason: impl Into<String>) -> Self {
        Self {
            probe: probe.to_owned(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_finds_channels_by_name() {
        let schema = Schema {
            channels: vec![
                ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory),
                ChannelSpec::new("alloc.count", Unit::Count, Group::Allocator),
            ],
        };
        assert_eq!(schema.index_of("alloc.count"), Some(1));
        assert_eq!(schema.index_of("gpu0.used"), None);
        assert_eq!(schema.len(), 2);
    }

    #[test]
    fn kinds_follow_the_table() {
        let k = |n: &str, u| Kind::infer(n, u);
        assert_eq!(k("mem.rss", Unit::Bytes), Kind::Level);
        assert_eq!(k("gpu1.proc_used", Unit::Bytes), Kind::Level);
        assert_eq!(k("log.vm_rss_mb", Unit::Mebibytes), Kind::Level);
        assert_eq!(k("mem.hwm", Unit::Bytes), Kind::Peak);
        assert_eq!(k("alloc.peak", Unit::Bytes), Kind::Peak);
        assert_eq!(k("mem.minflt", Unit::Count), Kind::Counter);
        assert_eq!(k("work.ops", Unit::Count), Kind::Counter);
        assert_eq!(k("log.step", Unit::Count), Kind::Counter);
        assert_eq!(k("proc.threads", Unit::Count), Kind::Gauge);
        assert_eq!(k("proc.cpu", Unit::Percent), Kind::Gauge);
        assert_eq!(k("gpu0.total", Unit::Bytes), Kind::Gauge);
        assert_eq!(k("sys.mem_available", Unit::Bytes), Kind::Gauge);
        assert_eq!(k("ingest.fill_ns_p50", Unit::Nanoseconds), Kind::Gauge);
        assert_eq!(k("log.loss", Unit::Number), Kind::Gauge);
    }

    #[test]
    fn a_stored_kind_wins_and_a_missing_one_is_inferred() {
        // As format v1 stored a channel: no kind, no labels.
        #[derive(Serialize)]
        struct V1 {
            name: &'static str,
            unit: Unit,
            group: Group,
        }
        let v1 = rmp_serde::to_vec_named(&V1 {
            name: "mem.hwm",
            unit: Unit::Bytes,
            group: Group::Memory,
        })
        .unwrap();
        let back: ChannelSpec = rmp_serde::from_slice(&v1).unwrap();
        assert_eq!(back.kind, Kind::Peak);
        let spec = ChannelSpec::new("pid42.rss", Unit::Bytes, Group::Memory)
            .with_kind(Kind::Gauge)
            .with_label("role", "worker");
        let bytes = rmp_serde::to_vec_named(&spec).unwrap();
        assert_eq!(rmp_serde::from_slice::<ChannelSpec>(&bytes).unwrap(), spec);
    }
}
