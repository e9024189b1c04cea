//! Every recording format version keeps a golden file that this build must
//! still read, value for value. A format change adds a new golden file and a
//! new test here; it never edits an old one.

use std::path::Path;

use flatline_telemetry::Kind;
use flatline_telemetry::recording::{EventKind, Recording};

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
    // v1 stored no kinds: the reader infers them from names and units.
    let kind = |n: &str| rec.header.schema.channels[rec.header.schema.index_of(n).unwrap()].kind;
    assert_eq!(kind("mem.rss"), Kind::Level);
    assert_eq!(kind("mem.hwm"), Kind::Peak);
    assert_eq!(kind("mem.minflt"), Kind::Counter);
    assert_eq!(kind("proc.cpu"), Kind::Gauge);
    assert!(
        rec.lifetimes
            .iter()
            .all(|l| l.from == 0 && l.until.is_none())
    );
    // Slow probes leave gaps between their readings; they must read back as gaps.
    let sys = rec.channel("sys.mem_total").unwrap();
    assert!(sys.iter().any(|v| v.is_nan()) && sys.iter().any(|v| !v.is_nan()));
}

/// `flatline export --csv` of every shipped v1 recording, byte for byte as the
/// last build that wrote format v1 exported it (SHA-256 of its output).
#[test]
fn shipped_v1_recordings_export_the_same_csv_as_before() {
    let dir = tempfile::tempdir().unwrap();
    for (file, want) in [
        (
            "golden/v1.flr",
            "c514403558c7330812a9cf10e81a708b0b181a92e213c155ffe6fe64e82b26d4",
        ),
        (
            "sample-soak-both-60s.flr",
            "27dc27a27a6c419ff9ad5e3e2505b5227565975576cffc24f1facbfacfb16a28",
        ),
        (
            "seed-linux-10min.flr",
            "ea438bfd295add08a2a94c6b8906bb17992b077330ffac33c3202ca466468912",
        ),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../recordings")
            .join(file);
        let rec = Recording::open(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(rec.header.format_version, 1, "{file}");
        let out = dir.path().join("out.csv");
        flatline_telemetry::recording::csv::export(&path, &out, true, Default::default()).unwrap();
        assert_eq!(sha256_hex(&std::fs::read(&out).unwrap()), want, "{file}");
    }
}

/// v2: the same soak as v1's golden file, written in column blocks with kinds.
#[test]
fn format_v2_still_loads() {
    let rec = golden("v2.flr");
    assert_eq!(rec.tail, None, "the golden file is whole");
    assert_eq!(rec.header.format_version, 2);
    assert_eq!(rec.header.source, "soak");
    assert_eq!(rec.header.host.hostname, "redacted");
    assert_eq!(
        rec.digest,
        "b1509bef919ccd3b30cc4a653d064ca2283b4a03b6853f50a5f305cb773a9637"
    );
    assert_eq!(
        (
            rec.len(),
            rec.events.len(),
            rec.header.schema.len(),
            rec.bytes
        ),
        (61, 16, 35, 6606)
    );
    assert_eq!(rec.header.config["step_ms"], "200");
    assert_eq!(rec.header.config["corpus_tokens"], "16671459");
    assert_eq!(rec.channel("mem.rss").unwrap()[0], 55_922_688.0);
    assert_eq!(rec.channel("work.steps").unwrap().last(), Some(&15.0));
    assert_eq!(rec.events[0].kind, EventKind::Phase("ingest".into()));
    let kind = |n: &str| rec.header.schema.channels[rec.header.schema.index_of(n).unwrap()].kind;
    assert_eq!(
        [
            kind("mem.rss"),
            kind("alloc.peak"),
            kind("work.ops"),
            kind("sys.cpu")
        ],
        [Kind::Level, Kind::Peak, Kind::Counter, Kind::Gauge]
    );
    let sys = rec.channel("sys.mem_total").unwrap();
    assert!(sys.iter().any(|v| v.is_nan()) && sys.iter().any(|v| !v.is_nan()));
    // Every value, checked against the file's own CSV export made when it was written.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v2.csv");
    flatline_telemetry::recording::csv::export(&rec.path, &out, true, Default::default()).unwrap();
    assert_eq!(sha256_hex(&std::fs::read(&out).unwrap()), V2_CSV_SHA256);
}

/// v3: the same soak again, its blocks and events deflated together in
/// packs; read value for value against its CSV export taken when it was made.
#[test]
fn format_v3_still_loads() {
    let rec = golden("v3.flr");
    assert_eq!(rec.tail, None, "the golden file is whole");
    assert_eq!(rec.header.format_version, 3);
    assert_eq!(rec.header.host.hostname, "redacted");
    assert_eq!(
        rec.digest,
        "f1d8179b359d54e9e5156d396a23a2180bc3245afaf654230be0af813ad1a686"
    );
    assert_eq!(
        (
            rec.len(),
            rec.events.len(),
            rec.header.schema.len(),
            rec.bytes
        ),
        (61, 17, 37, 5632)
    );
    assert_eq!(rec.header.config["step_ms"], "200");
    assert_eq!(rec.channel("mem.rss").unwrap()[0], 47_132_672.0);
    assert_eq!(rec.events[0].kind, EventKind::Phase("ingest".into()));
    let sys = rec.channel("sys.mem_total").unwrap();
    assert!(sys.iter().any(|v| v.is_nan()) && sys.iter().any(|v| !v.is_nan()));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v3.csv");
    flatline_telemetry::recording::csv::export(&rec.path, &out, true, Default::default()).unwrap();
    assert_eq!(
        sha256_hex(&std::fs::read(&out).unwrap()),
        "416b3b5f30ca45e0bfbdc20869e8e8cb151112ebac9c1e1ff05b0660c3b91bd1"
    );
}

/// v4: v3's frames, and facts read from outside the samples (a worker's
/// death as the job printed it, the job's exit status). Made by
/// `flatline watch --headless --redact-host --hz 10 --cgroup DIR -- python3
/// dashboard/tests/data/oom_job.py DIR 3` with a fake cgroup folder: its
/// worker is killed as the cgroup counts an OOM kill.
#[test]
fn format_v4_still_loads() {
    let rec = golden("v4.flr");
    assert_eq!(rec.tail, None, "the golden file is whole");
    assert_eq!(rec.header.format_version, 4);
    assert_eq!(rec.header.host.hostname, "redacted");
    assert_eq!(
        rec.digest,
        "ed2eb5ca79a509712ed2d821e11a08941c1ece976c647473d3e983448f2c6a21"
    );
    assert_eq!(
        (
            rec.len(),
            rec.events.len(),
            rec.header.schema.len(),
            rec.bytes
        ),
        (44, 10, 42, 6887)
    );
    let facts: Vec<(&str, Option<u32>, f64)> = rec
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fact {
                kind, pid, figures, ..
            } => Some((
                kind.as_str(),
                *pid,
                figures.values().next().copied().unwrap_or(f64::NAN),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        facts,
        [
            ("dataloader_killed", Some(6960), 9.0),
            ("exit", rec.header.config["pid"].parse().ok(), 1.0)
        ]
    );
    let kills = rec.channel("cgroup.oom_kills").unwrap();
    assert_eq!(flatline_analysis::rules::latest(kills), Some(1.0));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v4.csv");
    flatline_telemetry::recording::csv::export(&rec.path, &out, true, Default::default()).unwrap();
    assert_eq!(
        sha256_hex(&std::fs::read(&out).unwrap()),
        "8974e5487dd5920c3aa09f1943b666e732b421de01af477830f14b65ac7b2209"
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// SHA-256 of `flatline export --csv` of `golden/v2.flr`, taken when the file
/// was made: any change in how v2 values read back changes it.
const V2_CSV_SHA256: &str = "205d548c9b67ed2dbad1298e752f8e0c115b2d709ae689d281865255c681b9fa";

/// v5: v4's frames in heads with a sync word and the sample index, the
/// header and every schema change written twice (a reader goes on past a
/// damaged frame). Made by `flatline watch --headless --redact-host --hz
/// 10 --cgroup pod -- python3 dashboard/tests/data/oom_job.py pod 3 1` with
/// a fake cgroup folder: two workers join, one is killed and its channels
/// end.
#[test]
fn format_v5_still_loads() {
    let rec = golden("v5.flr");
    assert_eq!(rec.tail, None, "the golden file is whole");
    assert!(rec.losses.is_empty());
    assert_eq!(rec.header.format_version, 5);
    assert_eq!(rec.header.host.hostname, "redacted");
    assert_eq!(
        rec.digest,
        "12d1a99d802aadb7a08ea5de3cb08ae35dccb90e0f8a5c626af90665e0e5470a"
    );
    assert_eq!(
        (
            rec.len(),
            rec.events.len(),
            rec.header.schema.len(),
            rec.bytes,
            rec.frames
        ),
        (56, 12, 43, 12310, 26)
    );
    // Channels joined (the workers) and ended (the killed one), each
    // change written twice and read once.
    let joined = rec.lifetimes.iter().filter(|l| l.from > 0).count();
    let ended = rec.lifetimes.iter().filter(|l| l.until.is_some()).count();
    assert_eq!((joined, ended), (12, 8));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v5.csv");
    flatline_telemetry::recording::csv::export(&rec.path, &out, true, Default::default()).unwrap();
    assert_eq!(
        sha256_hex(&std::fs::read(&out).unwrap()),
        "d6308573140105ba089fb5f20eb4012c9a36c28d4717b45832bca61af187a980"
    );
}
