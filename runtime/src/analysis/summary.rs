//! What a person reads first: the growing level channels, most urgent
//! first, and one sentence about them. Receipts and the dashboard both ask
//! here, so they never disagree.

use super::rules::LimitSource;
use super::{ChannelAnalysis, Kind, Severity, Verdict};
use crate::telemetry::Unit;

/// One analysed channel, as the summary needs it.
#[derive(Debug, Clone, Copy)]
pub struct Assessed<'a> {
    pub name: &'a str,
    pub unit: Unit,
    pub analysis: &'a ChannelAnalysis,
    pub limit: Option<LimitSource>,
}

/// The level channels called growth (rising, not shrinking), most urgent
/// first: by severity, then by time to the limit, then by rate.
pub fn growing<'a>(rows: &[Assessed<'a>]) -> Vec<Assessed<'a>> {
    let mut g: Vec<Assessed<'a>> = rows
        .iter()
        .filter(|r| r.analysis.kind == Kind::Level && r.analysis.severity.is_some())
        .copied()
        .collect();
    g.sort_by(|a, b| {
        let (x, y) = (a.analysis, b.analysis);
        x.severity
            .cmp(&y.severity)
            .then(
                x.time_to_limit_s
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&y.time_to_limit_s.unwrap_or(f64::INFINITY)),
            )
            .then(
                y.projection_24h
                    .unwrap_or(0.0)
                    .total_cmp(&x.projection_24h.unwrap_or(0.0)),
            )
    });
    g
}

/// The order channels are listed in: growing levels by severity first,
/// then the rest as they came.
pub fn order(rows: &[Assessed<'_>]) -> Vec<usize> {
    let rank = |a: &ChannelAnalysis| match a.severity {
        Some(Severity::Critical) => 0,
        Some(Severity::Warning) => 1,
        Some(Severity::Info) => 2,
        None => 3,
    };
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by_key(|&i| rank(rows[i].analysis));
    idx
}

/// A rate a person reads without arithmetic: per second when it is large,
/// else per hour.
pub fn rate_text(per_s: f64, unit: Unit, value: &dyn Fn(f64, Unit) -> String) -> String {
    let big = match unit {
        Unit::Bytes => per_s.abs() >= 1024.0,
        _ => per_s.abs() >= 1.0,
    };
    if big {
        format!("{}/s", value(per_s, unit))
    } else {
        format!("{}/h", value(per_s * 3600.0, unit))
    }
}

/// One sentence a person can act on: "Memory is flat." / "tree.pss grows
/// 13.1 MiB/s: the cgroup's memory limit is reached in 1 h 12 min."
/// `value` and `duration` format numbers the way the caller shows them.
pub fn headline(
    rows: &[Assessed<'_>],
    value: &dyn Fn(f64, Unit) -> String,
    duration: &dyn Fn(f64) -> String,
) -> String {
    let memory: Vec<&Assessed<'_>> = rows
        .iter()
        .filter(|r| r.analysis.kind == Kind::Level && r.unit.is_bytes())
        .collect();
    let growing = growing(rows);
    let Some(top) = growing.first() else {
        let told: Vec<&&Assessed<'_>> = memory
            .iter()
            .filter(|r| r.analysis.verdict != Verdict::Insufficient)
            .collect();
        if told.is_empty() {
            return if memory.is_empty() {
                "No memory channel to judge.".into()
            } else {
                "Too few readings after the warm-up to judge memory.".into()
            };
        }
        let noisy: Vec<&str> = told
            .iter()
            .filter(|r| r.analysis.verdict == Verdict::Noisy)
            .map(|r| r.name)
            .collect();
        return match noisy.as_slice() {
            [] => "Memory is flat.".into(),
            [one] => format!("Memory does not grow; {one} varies more than 1 % of its level."),
            many => format!(
                "Memory does not grow; {} channels vary more than 1 % of their level.",
                many.len()
            ),
        };
    };
    let a = top.analysis;
    let per_s = a.projection_24h.unwrap_or(0.0) / 86_400.0;
    let how = match a.verdict {
        Verdict::Staircase => match a.quantum {
            Some(q) => format!(" in steps of {}", value(q, top.unit)),
            None => " in steps".into(),
        },
        _ => String::new(),
    };
    let mut s = format!(
        "{} grows {}{how}",
        top.name,
        rate_text(per_s, top.unit, value)
    );
    match (a.time_to_limit_s, top.limit) {
        (Some(t), Some(src)) => s.push_str(&format!(
            ": {} is reached in {}.",
            src.describe(),
            duration(t)
        )),
        (Some(t), None) => s.push_str(&format!(": its limit is reached in {}.", duration(t))),
        (None, _) => s.push_str(": no limit is known for it."),
    }
    if growing.len() > 1 {
        let others: Vec<&str> = growing[1..].iter().take(3).map(|r| r.name).collect();
        let more = growing.len() - 1 - others.len();
        s.push_str(&format!(
            " Also growing: {}{}.",
            others.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    s
}

/// Which layer of a PyTorch job's GPU memory grows (see
/// [`crate::telemetry::torch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuLayer {
    /// `torch.allocated` grows: live tensors are kept (a tensor leak).
    Tensors,
    /// `torch.reserved` grows while allocated is flat: the caching
    /// allocator holds ever more blocks (fragmentation).
    CachingAllocator,
    /// The driver's count of the process grows while reserved is flat:
    /// memory outside PyTorch's allocator.
    OutsidePytorch,
    /// Nothing grows.
    None,
}

/// What the layers of GPU memory say, in one sentence.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LayerFinding {
    pub layer: GpuLayer,
    pub text: String,
}

/// Which layer grows, where the job logs PyTorch's allocated and reserved
/// memory (`torch.allocated`, `torch.reserved`): the tensors, the caching
/// allocator, or what lies outside it (`gpu.other`, else the driver's count
/// of the watched processes, `gpu<i>.proc_used`). `None` without those
/// channels, or while too few readings are in to judge them.
pub fn gpu_layers(
    rows: &[Assessed<'_>],
    value: &dyn Fn(f64, Unit) -> String,
) -> Option<LayerFinding> {
    let find = |pred: &dyn Fn(&str) -> bool| {
        rows.iter()
            .find(|r| pred(r.name) && r.analysis.verdict != Verdict::Insufficient)
    };
    let allocated = find(&|n| n == "torch.allocated")?;
    let reserved = find(&|n| n == "torch.reserved")?;
    let driver = find(&|n| n == crate::telemetry::torch::OTHER)
        .or_else(|| find(&|n| n.starts_with("gpu") && n.ends_with(".proc_used")));
    let grows = |r: &Assessed<'_>| r.analysis.kind == Kind::Level && r.analysis.severity.is_some();
    let rate = |r: &Assessed<'_>| {
        let per_s = r.analysis.projection_24h.unwrap_or(0.0) / 86_400.0;
        format!("{} grows {}", r.name, rate_text(per_s, r.unit, value))
    };
    let (layer, text) = if grows(allocated) {
        (
            GpuLayer::Tensors,
            format!(
                "GPU: a tensor leak. {}: live tensors are kept from step to step \
                 (losses kept with their graphs, outputs cached in a list).",
                rate(allocated)
            ),
        )
    } else if grows(reserved) {
        (
            GpuLayer::CachingAllocator,
            format!(
                "GPU: PyTorch's caching allocator. {} while torch.allocated is flat: it holds \
                 ever more blocks it cannot reuse (fragmentation); try \
                 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
                rate(reserved)
            ),
        )
    } else if let Some(d) = driver.filter(|d| grows(d)) {
        (
            GpuLayer::OutsidePytorch,
            format!(
                "GPU: outside PyTorch. {} while torch.reserved is flat: the CUDA context, NCCL \
                 buffers, cuBLAS/cuDNN workspaces or another library allocate it.",
                rate(d)
            ),
        )
    } else {
        (
            GpuLayer::None,
            format!(
                "GPU: PyTorch's allocated and reserved memory{} do not grow.",
                driver.map_or(String::new(), |d| format!(" and {}", d.name))
            ),
        )
    };
    Some(LayerFinding { layer, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Context, analyze};

    fn value(v: f64, u: Unit) -> String {
        match u {
            Unit::Bytes => format!("{:.1} MiB", v / 1_048_576.0),
            _ => format!("{v}"),
        }
    }

    fn duration(s: f64) -> String {
        format!("{:.0} h", s / 3600.0)
    }

    #[test]
    fn the_most_urgent_growth_comes_first_and_flat_memory_says_so() {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let leak: Vec<f64> = t.iter().map(|t| 1e9 + 13.1 * 1_048_576.0 * t).collect();
        let slow: Vec<f64> = t.iter().map(|t| 1e9 + 2e4 * t).collect();
        let flat: Vec<f64> = t.iter().map(|_| 5e8).collect();
        let with_limit = |limit| Context {
            limit,
            min_growth: 65536.0,
            ..Context::default()
        };
        let a_leak = analyze(&t, &leak, &with_limit(Some(1e11)));
        let a_slow = analyze(&t, &slow, &with_limit(None));
        let a_flat = analyze(&t, &flat, &with_limit(Some(1e11)));
        assert_eq!(a_leak.severity, Some(Severity::Critical));
        assert_eq!(a_slow.severity, Some(Severity::Info));
        let row = |name, analysis, limit| Assessed {
            name,
            unit: Unit::Bytes,
            analysis,
            limit,
        };
        let rows = [
            row("mem.rss", &a_slow, None),
            row("tree.pss", &a_leak, Some(LimitSource::Cgroup)),
            row("alloc.live", &a_flat, None),
        ];
        let g = growing(&rows);
        assert_eq!(
            g.iter().map(|r| r.name).collect::<Vec<_>>(),
            ["tree.pss", "mem.rss"]
        );
        assert_eq!(order(&rows), [1, 0, 2]);
        let h = headline(&rows, &value, &duration);
        assert!(
            h.starts_with(
                "tree.pss grows 13.1 MiB/s: the cgroup's memory limit is reached in 2 h."
            ),
            "{h}"
        );
        assert!(h.ends_with("Also growing: mem.rss."), "{h}");
        let flat_rows = [row("alloc.live", &a_flat, None)];
        assert_eq!(headline(&flat_rows, &value, &duration), "Memory is flat.");
        assert_eq!(
            headline(&[], &value, &duration),
            "No memory channel to judge."
        );
        assert_eq!(rate_text(100.0, Unit::Bytes, &value), "0.3 MiB/h");
        assert_eq!(rate_text(2048.0, Unit::Bytes, &value), "0.0 MiB/s");
    }

    #[test]
    fn the_growing_layer_of_gpu_memory_is_named() {
        let t: Vec<f64> = (0..600).map(f64::from).collect();
        let ctx = Context::default();
        let leak = analyze(
            &t,
            &t.iter().map(|t| 2e9 + 1_048_576.0 * t).collect::<Vec<_>>(),
            &ctx,
        );
        let flat = analyze(&t, &vec![3e9; t.len()], &ctx);
        let short = analyze(&t[..3], &[1.0, 2.0, 3.0], &ctx);
        let row = |name, analysis| Assessed {
            name,
            unit: Unit::Bytes,
            analysis,
            limit: None,
        };
        let layer = |a, r, d| {
            gpu_layers(
                &[
                    row("torch.allocated", a),
                    row("torch.reserved", r),
                    row("gpu.other", d),
                ],
                &value,
            )
            .map(|f| f.layer)
        };
        assert_eq!(layer(&leak, &leak, &flat), Some(GpuLayer::Tensors));
        assert_eq!(layer(&flat, &leak, &flat), Some(GpuLayer::CachingAllocator));
        assert_eq!(layer(&flat, &flat, &leak), Some(GpuLayer::OutsidePytorch));
        assert_eq!(layer(&flat, &flat, &flat), Some(GpuLayer::None));
        assert_eq!(layer(&short, &flat, &flat), None, "too few readings");
        let f = gpu_layers(
            &[row("torch.allocated", &flat), row("torch.reserved", &leak)],
            &value,
        )
        .unwrap();
        assert!(f.text.contains("expandable_segments"), "{}", f.text);
        assert!(
            f.text.contains("torch.reserved grows 1.0 MiB/s"),
            "{}",
            f.text
        );
        assert_eq!(gpu_layers(&[row("gpu0.used", &leak)], &value), None);
    }
}
