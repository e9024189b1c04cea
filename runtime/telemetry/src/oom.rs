//! Out-of-memory errors as jobs print them, read from their output: each
//! becomes an [`EventKind::Fact`] (kinds below) and a marker.
//!
//! - `cuda_oom`: PyTorch's caching allocator ran out, in either wording:
//!   2.x "CUDA out of memory. Tried to allocate X. GPU N has a total
//!   capacity of T of which F is free. … Of the allocated memory A is
//!   allocated by PyTorch, and R is reserved by PyTorch but unallocated.";
//!   1.x "CUDA out of memory. Tried to allocate X (GPU N; T total capacity;
//!   A already allocated; F free; R reserved in total by PyTorch)". Figures:
//!   `tried`, `gpu`, `total`, `free`, `allocated`, `reserved_unallocated`
//!   (1.x: reserved − allocated), `in_use` (2.x: this process's), in bytes.
//! - `torch_oom`: a `torch.OutOfMemoryError` of another device (MPS, XPU).
//! - `cuda_error_oom`: "CUDA error: out of memory" (outside the caching
//!   allocator: a context, a library's workspace).
//! - `nccl_oom`: NCCL's "Cuda failure … 'out of memory'" and its failed
//!   allocations.
//! - `dataloader_killed`: "DataLoader worker (pid N) is killed by signal:
//!   Killed." (`pid`, `signal` 9), and `dataloader_exited` for "DataLoader
//!   worker (pid(s) N) exited unexpectedly".
//! - `memory_error`: Python's `MemoryError` (numpy's "Unable to allocate X
//!   for an array…": `tried`).
//! - `bad_alloc`: C++'s `std::bad_alloc`.

use flatline_format::EventKind;

/// `20.00 GiB`, `10.75 MiB`, `512 bytes`, … at the start of `s`, in bytes.
fn size(s: &str) -> Option<f64> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let v: f64 = s[..end].parse().ok()?;
    let unit = s[end..].trim_start();
    let mult = [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("TB", 1_000_000_000_000),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
        ("bytes", 1),
        ("B", 1),
    ]
    .iter()
    .find(|(u, _)| unit.starts_with(u))?
    .1;
    Some(v * mult as f64)
}

/// The size after the first `key` in `text`.
fn size_after(text: &str, key: &str) -> Option<f64> {
    size(&text[text.find(key)? + key.len()..])
}

/// The size before `key` (as in "14.50 GiB already allocated"): the last
/// number and unit before it, back to a separator.
fn size_before(text: &str, key: &str) -> Option<f64> {
    let head = &text[..text.find(key)?];
    let start = head.rfind([';', '(', ','])?;
    size(&head[start + 1..])
}

/// A number after `key`.
fn int_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn mib(b: f64) -> String {
    if b >= f64::from(1u32 << 30) {
        format!("{:.2} GiB", b / f64::from(1u32 << 30))
    } else {
        format!("{:.1} MiB", b / f64::from(1u32 << 20))
    }
}

/// A signal as the DataLoader names it (`strsignal`'s words).
fn signal_of(words: &str) -> Option<f64> {
    let w = words.trim().trim_end_matches('.');
    Some(match w {
        "Killed" => 9.0,
        "Terminated" => 15.0,
        "Segmentation fault" => 11.0,
        "Aborted" => 6.0,
        "Bus error" => 7.0,
        "Interrupt" => 2.0,
        "Hangup" => 1.0,
        _ => w.strip_prefix("Unknown signal ")?.parse().ok()?,
    })
}

/// What a printed line says of memory running out, as a fact and the
/// marker's text; `None` for any other line.
pub fn parse(text: &str) -> Option<(EventKind, String)> {
    if let Some(at) = text.find("CUDA out of memory") {
        let m = &text[at..];
        let tried = size_after(m, "Tried to allocate ");
        let mut figures: Vec<(&str, f64)> = Vec::new();
        let mut push = |k, v: Option<f64>| {
            if let Some(v) = v {
                figures.push((k, v));
            }
        };
        push("tried", tried);
        let v2 = m.contains("total capacity of");
        let (allocated, unallocated);
        if v2 {
            push("gpu", int_after(m, "GPU "));
            push("total", size_after(m, "total capacity of "));
            push("free", size_after(m, "of which "));
            push("in_use", size_after(m, "this process has "));
            allocated = size_after(m, "Of the allocated memory ");
            unallocated = size_after(m, "PyTorch, and ");
        } else {
            push("gpu", int_after(m, "(GPU "));
            push("total", size_before(m, " total capacity"));
            push("free", size_before(m, " free"));
            allocated = size_before(m, " already allocated");
            unallocated = size_before(m, " reserved in total")
                .zip(allocated)
                .map(|(r, a)| (r - a).max(0.0));
        }
        push("allocated", allocated);
        push("reserved_unallocated", unallocated);
        let mut said = String::from("CUDA out of memory");
        if let Some(t) = tried {
            said += &format!(": tried to allocate {}", mib(t));
        }
        // The marker is short: its lane is narrow.
        let marker = said.clone();
        let free = figures.iter().find(|(k, _)| *k == "free").map(|f| f.1);
        let total = figures.iter().find(|(k, _)| *k == "total").map(|f| f.1);
        if let (Some(f), Some(t)) = (free, total) {
            said += &format!(" with {} free of {}", mib(f), mib(t));
        }
        if let Some(u) = unallocated {
            said += &format!("; {} reserved by PyTorch but unallocated", mib(u));
            if allocated.is_some_and(|a| u >= 0.1 * (a + u)) && tried.is_none_or(|t| u >= t) {
                said += " (fragmentation: the allocator holds enough, in pieces; try \
                         PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)";
            }
        }
        return Some((EventKind::fact("cuda_oom", said, &figures), marker));
    }
    if text.contains("OutOfMemoryError") && text.contains("out of memory") {
        let tried = size_after(text, "Tried to allocate ");
        let figures: Vec<(&str, f64)> = tried.map(|t| ("tried", t)).into_iter().collect();
        let t = text.trim().to_owned();
        return Some((EventKind::fact("torch_oom", t.clone(), &figures), t));
    }
    if text.contains("CUDA error: out of memory") {
        let t = "CUDA error: out of memory (outside PyTorch's caching allocator)".to_owned();
        return Some((EventKind::fact("cuda_error_oom", t.clone(), &[]), t));
    }
    if text.contains("NCCL")
        && (text.contains("'out of memory'") || text.contains("Failed to CUDA calloc"))
    {
        let t = format!("NCCL ran out of GPU memory: {}", text.trim());
        return Some((
            EventKind::fact("nccl_oom", t.clone(), &[]),
            "NCCL out of memory".into(),
        ));
    }
    if let Some(at) = text.find("DataLoader worker (pid") {
        let m = &text[at..];
        let pid = int_after(m, "(pid").or_else(|| int_after(m, "(pid(s)"));
        if let Some(rest) = m.split_once("is killed by signal:").map(|p| p.1) {
            let sig = signal_of(rest);
            let t = format!(
                "DataLoader worker {} was killed by signal: {}",
                pid.map_or("?".into(), |p| p.to_string()),
                rest.trim().trim_end_matches('.')
            );
            let mut figures = Vec::new();
            if let Some(s) = sig {
                figures.push(("signal", s));
            }
            let mut f = EventKind::fact("dataloader_killed", t.clone(), &figures);
            if let Some(p) = pid {
                f = f.of_pid(p as u32);
            }
            return Some((f, t));
        }
        if m.contains("exited unexpectedly") {
            let t = m.trim().to_owned();
            let mut f = EventKind::fact("dataloader_exited", t.clone(), &[]);
            if let Some(p) = int_after(m, "(pid(s)").or(pid) {
                f = f.of_pid(p as u32);
            }
            return Some((f, t));
        }
    }
    let trimmed = text.trim();
    if trimmed.starts_with("MemoryError")
        || trimmed.contains("numpy.core._exceptions._ArrayMemoryError")
        || trimmed.contains("numpy._core._exceptions._ArrayMemoryError")
    {
        let tried = size_after(trimmed, "Unable to allocate ");
        let figures: Vec<(&str, f64)> = tried.map(|t| ("tried", t)).into_iter().collect();
        let said = match tried {
            Some(t) => format!("MemoryError: Python could not allocate {}", mib(t)),
            None => "MemoryError: Python could not allocate memory".to_owned(),
        };
        return Some((
            EventKind::fact("memory_error", said.clone(), &figures),
            said,
        ));
    }
    if trimmed.contains("std::bad_alloc") {
        let t = "std::bad_alloc: a C++ allocation failed".to_owned();
        return Some((EventKind::fact("bad_alloc", t.clone(), &[]), t));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(k: &EventKind) -> (&str, &std::collections::BTreeMap<String, f64>, &str) {
        match k {
            EventKind::Fact {
                kind,
                figures,
                text,
                ..
            } => (kind.as_str(), figures, text.as_str()),
            _ => panic!("a fact"),
        }
    }

    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;

    #[test]
    fn pytorch_2s_cuda_oom_gives_every_figure_and_names_fragmentation() {
        let line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 12.31 GiB is free. Including non-PyTorch memory, this process has 66.83 GiB memory in use. Of the allocated memory 40.12 GiB is allocated by PyTorch, and 26.10 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";
        let (f, marker) = parse(line).unwrap();
        let (kind, fig, text) = figures(&f);
        assert_eq!(kind, "cuda_oom");
        assert_eq!(fig["tried"], 20.0 * GIB);
        assert_eq!(fig["gpu"], 0.0);
        assert_eq!(fig["total"], 79.15 * GIB);
        assert_eq!(fig["free"], 12.31 * GIB);
        assert_eq!(fig["in_use"], 66.83 * GIB);
        assert_eq!(fig["allocated"], 40.12 * GIB);
        assert_eq!(fig["reserved_unallocated"], 26.10 * GIB);
        assert!(
            text.contains("26.10 GiB reserved by PyTorch but unallocated"),
            "{text}"
        );
        assert!(
            text.contains("fragmentation") && text.contains("expandable_segments"),
            "{text}"
        );
        assert!(
            marker.starts_with("CUDA out of memory: tried to allocate 20.00 GiB"),
            "{marker}"
        );
    }

    #[test]
    fn pytorch_1s_cuda_oom_gives_reserved_minus_allocated() {
        let line = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.50 GiB already allocated; 10.75 MiB free; 14.62 GiB reserved in total by PyTorch)";
        let (f, _) = parse(line).unwrap();
        let (kind, fig, text) = figures(&f);
        assert_eq!(kind, "cuda_oom");
        assert_eq!(fig["tried"], 20.0 * MIB);
        assert_eq!(fig["total"], 15.78 * GIB);
        assert_eq!(fig["allocated"], 14.50 * GIB);
        assert_eq!(fig["free"], 10.75 * MIB);
        let u = fig["reserved_unallocated"];
        assert!((u - 0.12 * GIB).abs() < 1.0, "{u}");
        assert!(
            text.contains("reserved by PyTorch but unallocated"),
            "{text}"
        );
        assert!(
            !text.contains("fragmentation"),
            "0.12 of 14.6 GiB is no fragmentation: {text}"
        );
    }

    #[test]
    fn the_other_wordings_are_each_their_kind() {
        let kind = |l: &str| parse(l).map(|(f, _)| figures(&f).0.to_owned());
        assert_eq!(
            kind("RuntimeError: DataLoader worker (pid 1321) is killed by signal: Killed. "),
            Some("dataloader_killed".into())
        );
        let (f, _) =
            parse("RuntimeError: DataLoader worker (pid 1321) is killed by signal: Killed.")
                .unwrap();
        assert!(
            matches!(&f, EventKind::Fact { pid: Some(1321), figures, .. } if figures["signal"] == 9.0)
        );
        assert_eq!(
            kind("RuntimeError: DataLoader worker (pid(s) 4410, 4411) exited unexpectedly"),
            Some("dataloader_exited".into())
        );
        assert_eq!(kind("MemoryError"), Some("memory_error".into()));
        let (f, _) = parse("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 8.00 GiB for an array with shape (1073741824,) and data type float64").unwrap();
        assert_eq!(figures(&f).1["tried"], 8.0 * GIB);
        assert_eq!(
            kind("terminate called after throwing an instance of 'std::bad_alloc'"),
            Some("bad_alloc".into())
        );
        assert_eq!(
            kind("RuntimeError: CUDA error: out of memory"),
            Some("cuda_error_oom".into())
        );
        assert_eq!(
            kind("host:1:1 [0] include/alloc.h:48 NCCL WARN Cuda failure 2 'out of memory'"),
            Some("nccl_oom".into())
        );
        assert_eq!(
            kind("torch.OutOfMemoryError: MPS backend out of memory (MPS allocated: 9.00 GB)"),
            Some("torch_oom".into())
        );
        assert_eq!(kind("step 10: loss 2.3"), None);
        assert_eq!(kind("no MemoryError here, said in passing"), None);
    }
}
