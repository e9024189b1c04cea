//! Every recording format version keeps a golden file that this build must
//! still read, value for value. A format change adds a new golden file and a
//! new test here; it never edits an old one.

use std::path::Path;

use flatline_runtime::recording::{EventKind, Recording};

fn golden(name: &str) -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../recordings/golden")
        .join(name);
    Recording::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// v1: `flatline soak --seconds 3 --workload ingest --step-ms 200 --hz 20 --redact-host`.
#[test]
fn format_v1_still_loads() {
    let rec = golden("v1.flr");
    assert_eq!(rec.tail, None, "the golden file is whole");
    assert_eq!(rec.header.format_version, 1);
    assert_eq!(rec.header.source, "soak");
    assert_eq!(rec.header.host.hostname, "redacted");
    assert_eq!(
        rec.digest,
        "5c54b06eac4f42418ee5f37394ebdfea1791e3660bf9411281b8e16f8b9afe09"
    );
    assert_eq!(
        rec.footer.as_ref().map(|f| f.end.as_str()),
        Some("completed")
    );
    assert_eq!(
        (rec.len(), rec.events.len(), rec.header.schema.len()),
        (61, 16, 34)
    );
    assert_eq!(rec.bytes, 8078);
    assert_eq!(rec.channel("mem.rss").unwrap()[0], 42_917_888.0);
    assert_eq!(rec.channel("work.steps").unwrap().last(), Some(&15.0));
    assert_eq!(rec.events[0].kind, EventKind::Phase("ingest".into()));
    assert!(rec.events[1..].iter().enumerate().all(|(i, e)| e.kind
        == EventKind::Step {
            step: i as u64 + 1,
            tokens: Some((i as u64 + 1) * 16_384)
        }));
    // Slow probes leave gaps between their readings; they must read back as gaps.
    let sys = rec.channel("sys.mem_total").unwrap();
    assert!(sys.iter().any(|v| v.is_nan()) && sys.iter().any(|v| !v.is_nan()));
}
