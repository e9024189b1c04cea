//! Facts about channels that every view of them must agree on: what bounds a
//! channel (its limit), which channel is the step axis, and a channel's
//! plain statistics. Receipts and the dashboard both ask here.

use crate::recording::HostFacts;
use crate::telemetry::{STEP_CHANNELS, Schema, Unit};

/// First, last, min and max of the readings of one channel (NaN skipped).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelStats {
    pub samples: usize,
    pub first: f64,
    pub last: f64,
    pub min: f64,
    pub max: f64,
}

/// The statistics of one channel's readings.
pub fn channel_stats(col: &[f64]) -> ChannelStats {
    let mut st = ChannelStats {
        samples: 0,
        first: f64::NAN,
        last: f64::NAN,
        min: f64::NAN,
        max: f64::NAN,
    };
    for &v in col.iter().filter(|v| !v.is_nan()) {
        if st.samples == 0 {
            st.first = v;
            st.min = v;
            st.max = v;
        }
        st.samples += 1;
        st.last = v;
        st.min = st.min.min(v);
        st.max = st.max.max(v);
    }
    st
}

/// The host's RAM, for the process memory channels (in bytes).
pub fn ram_limit(name: &str, unit: Unit, host: &HostFacts) -> Option<f64> {
    (unit == Unit::Bytes && name.starts_with("mem.") && host.mem_total_bytes > 0)
        .then_some(host.mem_total_bytes as f64)
}

/// The channel whose latest reading bounds this one: a GPU's total memory for
/// its used memory and for a process's share of it.
pub fn limit_channel(name: &str) -> Option<String> {
    let (index, what) = name.strip_prefix("gpu")?.split_once('.')?;
    (matches!(what, "used" | "proc_used") && index.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("gpu{index}.total"))
}

/// The latest reading of a channel (gaps skipped).
pub fn latest(values: &[f64]) -> Option<f64> {
    values.iter().rev().copied().find(|v| !v.is_nan())
}

/// True when a counter's readings advance (not all equal): only then is it
/// an axis. A `work.steps` that stays 0 (a workload without steps) is no
/// step axis, and drift per step over it would divide by nothing.
pub fn advances(values: &[f64]) -> bool {
    let s = channel_stats(values);
    s.samples > 1 && s.max > s.min
}

/// The step axis of a stream: the first of [`STEP_CHANNELS`] it has whose
/// readings advance. `column(i)` gives channel `i`'s readings.
pub fn step_axis<'a>(schema: &Schema, column: impl Fn(usize) -> &'a [f64]) -> Option<usize> {
    STEP_CHANNELS
        .iter()
        .filter_map(|n| schema.index_of(n))
        .find(|&i| advances(column(i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{ChannelSpec, Group};

    #[test]
    fn limits_come_from_the_host_or_the_gpus_total() {
        let host = HostFacts {
            mem_total_bytes: 1 << 30,
            ..HostFacts::default()
        };
        assert_eq!(ram_limit("mem.rss", Unit::Bytes, &host), Some(1073741824.0));
        assert_eq!(ram_limit("mem.minflt", Unit::Count, &host), None);
        assert_eq!(ram_limit("gpu0.used", Unit::Bytes, &host), None);
        assert_eq!(
            limit_channel("gpu12.proc_used").as_deref(),
            Some("gpu12.total")
        );
        assert_eq!(limit_channel("gpux.used"), None);
        assert_eq!(limit_channel("mem.rss"), None);
        assert_eq!(latest(&[1.0, 2.0, f64::NAN]), Some(2.0));
    }

    #[test]
    fn a_step_channel_is_an_axis_only_when_it_advances() {
        let ch = |n: &str| ChannelSpec::new(n, Unit::Count, Group::Workload);
        let schema = Schema {
            channels: vec![ch("work.steps"), ch("log.step")],
        };
        let still = [0.0, 0.0, 0.0];
        let moving = [1.0, f64::NAN, 2.0];
        assert_eq!(step_axis(&schema, |i| [&still[..], &moving][i]), Some(1));
        assert_eq!(step_axis(&schema, |i| [&moving[..], &moving][i]), Some(0));
        assert_eq!(step_axis(&schema, |_| &still[..]), None);
        assert!(!advances(&[f64::NAN, 3.0]));
    }
}
