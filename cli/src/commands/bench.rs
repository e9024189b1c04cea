//! `flatline bench`: run a reference workload and print its figures.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result};
use flatline_analysis::Verdict;
use flatline_arena::workload::ingest::{Corpus, CorpusSource};
use flatline_arena::workload::ingest_bench::{self, FillStats, IngestBenchConfig};
use flatline_arena::workload::ops1b::{self, RING_SLOTS};
use flatline_telemetry::recording::{Recording, RecordingSetup};
use flatline_telemetry::work::WorkProgress;
use flatline_telemetry::{SamplerConfig, SamplerExit};
use serde::Serialize;

use crate::cli::{AnalysisBenchArgs, BenchCommand, IngestArgs, Ops1bArgs};
use flatline_receipt::fmt::{nanos, thousands};
use flatline_stream::session::Session;
use flatline_telemetry::names;

/// Checksums of `ops1b` from a fresh ring, known independently (C reference).
const KNOWN_OPS1B: [(u64, u64); 2] = [
    (300_000_000, 7_851_891_676),
    (1_000_000_000, 25_689_187_392),
];

pub fn run(cmd: BenchCommand, viewer: &dyn crate::Viewer) -> Result<()> {
    match cmd {
        BenchCommand::Ops1b(args) => run_ops1b(&args),
        BenchCommand::Ingest(args) => run_ingest(&args),
        BenchCommand::Analysis(args) => run_analysis(&args),
        BenchCommand::Headlines(args) => run_headlines(&args),
        cmd @ (BenchCommand::Ui(_) | BenchCommand::Window(_)) => viewer.bench(cmd),
    }
}

/// What the telemetry saw while a bench ran.
#[derive(Debug, Serialize)]
struct TelemetrySummary {
    hz: f64,
    channels: usize,
    /// Samples the recorder wrote.
    samples: u64,
    /// Samples found on reading the recording back (equal to `samples` when
    /// nothing was lost between the writer and the file).
    samples_read_back: u64,
    dropped: u64,
    /// Allocation calls of the sampler thread after its first few ticks.
    sampler_steady_allocs: Option<f64>,
    /// Size of the (temporary) recording the samples went into.
    recording_bytes: u64,
    /// CPU time the recorder thread used.
    recorder_cpu_ns: u64,
    unavailable: BTreeMap<String, String>,
}

/// Runs `run` with the sampler at `hz` (none at 0), recording the stream
/// into a temporary recording that is read back (to report on it) and removed.
fn with_telemetry<R>(
    hz: f64,
    progress: &Arc<WorkProgress>,
    run: impl FnOnce() -> Result<R>,
) -> Result<(R, Option<TelemetrySummary>)> {
    if hz == 0.0 {
        return Ok((run()?, None));
    }
    let dir = tempfile::tempdir().context("creating a temporary folder for the recording")?;
    let path = dir.path().join("bench.flr");
    let mut setup = RecordingSetup::new("bench");
    setup.hz(hz);
    let session = Session::start(
        setup,
        SamplerConfig {
            hz,
            progress: Some(progress.clone()),
            ..SamplerConfig::default()
        },
        &path,
        false,
    )?;
    let out = run();
    let channels = session.schema.len();
    let unavailable = session
        .unavailable
        .iter()
        .map(|u| (u.probe.clone(), u.reason.clone()))
        .collect();
    let end = session.finish("completed")?;
    if end.exit != SamplerExit::Stopped {
        anyhow::bail!("telemetry ended early: {:?}", end.exit);
    }
    // Read the recording back: it must be whole, and it tells whether the
    // sampler allocated after its first few ticks.
    let rec = Recording::open(&path).context("reading back the bench recording")?;
    if let Some(t) = &rec.tail {
        anyhow::bail!("the bench recording is not whole: {t}");
    }
    let sampler_steady_allocs = rec
        .channel(names::TELEMETRY_SAMPLER_ALLOCS)
        .filter(|c| c.len() > 5)
        .map(|c| c[c.len() - 1] - c[5]);
    let w = &end.recorder.write;
    let summary = TelemetrySummary {
        hz,
        channels,
        samples: w.samples,
        samples_read_back: rec.len() as u64,
        dropped: end.dropped,
        sampler_steady_allocs,
        recording_bytes: w.bytes,
        recorder_cpu_ns: end.recorder.cpu_ns,
        unavailable,
    };
    Ok((out?, Some(summary)))
}

/// `report` as a JSON object with a `telemetry` member added.
fn json_with(report: &impl Serialize, tel: &Option<TelemetrySummary>) -> Result<String> {
    let mut v = serde_json::to_value(report)?;
    v["telemetry"] = serde_json::to_value(tel)?;
    // One buffer big enough for any report, so the number of allocation calls
    // does not depend on how many digits the figures have (bench/heaptrack.sh
    // compares whole-process counts across run lengths).
    let mut out = Vec::with_capacity(4096);
    serde_json::to_writer(&mut out, &v)?;
    Ok(String::from_utf8(out)?)
}

fn print_telemetry(tel: &Option<TelemetrySummary>) {
    let Some(t) = tel else { return };
    println!(
        "  telemetry at {} Hz: {} samples of {} channels, {} dropped, sampler allocations in steady state: {}",
        t.hz,
        thousands(t.samples),
        t.channels,
        thousands(t.dropped),
        allocs(t.sampler_steady_allocs)
    );
    for (probe, reason) in &t.unavailable {
        println!("    unavailable: {probe}: {reason}");
    }
}

fn run_ops1b(args: &Ops1bArgs) -> Result<()> {
    let progress = WorkProgress::new();
    let (r, tel) = with_telemetry(args.telemetry_hz, &progress, || {
        ops1b::bench_layout(args.layout.into(), args.ops, Some(&progress))
            .context("setting up the ops1b ring")
    })?;
    if args.json {
        println!("{}", json_with(&r, &tel)?);
        return Ok(());
    }
    let known = KNOWN_OPS1B
        .iter()
        .find(|(ops, _)| *ops == r.ops)
        .map(|&(_, sum)| sum);
    let check = match known {
        Some(sum) if sum == r.checksum => " (the known answer)",
        Some(_) => " (WRONG: differs from the known answer)",
        None => "",
    };
    match r.layout {
        ops1b::Layout::Aos => println!(
            "ops1b  {} ops over a ring of {} × 64-byte orders ({} MiB)",
            thousands(r.ops),
            thousands(RING_SLOTS as u64),
            (RING_SLOTS * 64) >> 20
        ),
        ops1b::Layout::Soa => println!(
            "ops1b  {} ops over {} slots, hot fields in u32 arrays ({} KiB) beside the 64-byte orders",
            thousands(r.ops),
            thousands(RING_SLOTS as u64),
            (RING_SLOTS * 8) >> 10
        ),
    }
    println!(
        "  time {}   {:.3} ns/op   {:.1} Mops/s",
        nanos(r.elapsed_ns),
        r.ns_per_op,
        r.mops_per_s
    );
    println!("  checksum {}{check}", thousands(r.checksum));
    println!(
        "  heap allocations in the timed loop: {}",
        allocs(r.heap_allocs.map(|n| n as f64))
    );
    print_telemetry(&tel);
    if known.is_some_and(|sum| sum != r.checksum) {
        anyhow::bail!(
            "ops1b checksum {} differs from the known answer",
            r.checksum
        );
    }
    Ok(())
}

fn run_ingest(args: &IngestArgs) -> Result<()> {
    let corpus = match &args.corpus {
        Some(path) => Corpus::open(path)?,
        None if args.huge_pages => {
            Corpus::generate_huge(args.corpus_tokens, args.seed.wrapping_add(1))?
        }
        None => Corpus::generate(args.corpus_tokens, args.seed.wrapping_add(1)),
    };
    let cfg = IngestBenchConfig {
        batch: args.batch,
        block: args.block,
        iters: args.iters,
        warmup: args.warmup,
        seed: args.seed,
        baseline: !args.no_baseline,
        progress: Some(WorkProgress::new()),
        pipelined_step_ns: args.pipelined.then(|| (args.step_us * 1e3).round() as u64),
    };
    let progress = cfg.progress.clone().expect("set above");
    let (mut r, tel) = with_telemetry(args.telemetry_hz, &progress, || {
        ingest_bench::bench(&corpus, &cfg).context("running the ingest bench")
    })?;
    if args.huge_pages {
        r.huge_page_bytes = Some(anon_huge_pages().unwrap_or(0));
    }
    if args.json {
        println!("{}", json_with(&r, &tel)?);
        return Ok(());
    }
    let source = match &r.corpus {
        CorpusSource::Generated { seed } => format!("generated corpus (seed {seed})"),
        CorpusSource::File { path } => format!("corpus {}", path.display()),
    };
    println!(
        "ingest  B={} T={}  {source} of {} tokens  {} timed batches after {} warm-up",
        r.batch,
        r.block,
        thousands(r.corpus_tokens as u64),
        thousands(r.iters as u64),
        thousands(r.warmup_iters as u64)
    );
    println!(
        "  {:<10}{:>12}{:>12}{:>12}{:>16}",
        "loader", "fill p50", "fill p95", "fill p99", "allocs/batch"
    );
    let arena = FillStats {
        fill_ns_p50: r.fill_ns_p50,
        fill_ns_p95: r.fill_ns_p95,
        fill_ns_p99: r.fill_ns_p99,
        allocs_per_batch: r.allocs_per_batch,
    };
    row("arena", &arena);
    row("plain", &r.plain);
    println!(
        "  {:<10}{:>12}{:>12}{:>12}   only writing the two [B, T] outputs",
        "floor",
        nanos(r.floor_ns_p50),
        nanos(r.floor_ns_p95),
        nanos(r.floor_ns_p99),
    );
    println!(
        "  arena / floor at p50: {:.2}×   (arena: rows of the next batch prefetched while this one is copied; plain: without)",
        r.fill_ns_p50 as f64 / r.floor_ns_p50.max(1) as f64
    );
    if let Some(p) = &r.pipelined {
        let s = &p.stats;
        println!(
            "  pipelined, the consumer holding each batch {}: hand-off p50 {}  p95 {}  p99 {}; producer fill p50 {}; allocs/batch {} consumer, {} producer",
            nanos(p.step_ns),
            nanos(s.handoff_ns_p50),
            nanos(s.handoff_ns_p95),
            nanos(s.handoff_ns_p99),
            nanos(s.fill_ns_p50),
            allocs(s.consumer_allocs_per_batch),
            allocs(s.producer_allocs_per_batch),
        );
    }
    if let Some(b) = &r.baseline {
        row("baseline", b);
        println!(
            "  baseline / arena at p50: {:.1}×",
            b.fill_ns_p50 as f64 / r.fill_ns_p50.max(1) as f64
        );
    }
    if let Some(b) = r.huge_page_bytes {
        println!(
            "  corpus of {} in memory asked for huge pages: the kernel gave {} MiB of them",
            mib(r.corpus_tokens as u64 * 2),
            b >> 20
        );
    }
    print_telemetry(&tel);
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

/// This process's anonymous memory in huge pages (`AnonHugePages` of
/// `/proc/self/smaps_rollup`), in bytes; `None` where it cannot be read.
fn anon_huge_pages() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = text.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn row(name: &str, s: &FillStats) {
    println!(
        "  {name:<10}{:>12}{:>12}{:>12}{:>16}",
        nanos(s.fill_ns_p50),
        nanos(s.fill_ns_p95),
        nanos(s.fill_ns_p99),
        allocs(s.allocs_per_batch)
    );
}

fn allocs(n: Option<f64>) -> String {
    match n {
        Some(n) if n.fract() == 0.0 => format!("{n:.0}"),
        Some(n) => format!("{n:.2}"),
        None => "not counted".into(),
    }
}

/// Times `analysis::analyze` on one synthetic channel: a staircase of
/// 256 KiB steps every 50 s with 4 KiB of noise, sampled at 100 Hz.
fn run_analysis(args: &AnalysisBenchArgs) -> Result<()> {
    if args.corpus {
        return run_corpus(args);
    }
    if args.real {
        return run_real(args);
    }
    if args.delay {
        return run_delay(args);
    }
    use flatline_analysis::{Context, analyze};
    use flatline_arena::workload::SplitMix64;
    let mut rng = SplitMix64::new(42);
    let t: Vec<f64> = (0..args.points).map(|i| i as f64 / 100.0).collect();
    let v: Vec<f64> = (0..args.points)
        .map(|i| {
            let noise = (rng.below(8193) as f64 - 4096.0).round();
            1.3e9 + 262_144.0 * (i / 5000) as f64 + noise
        })
        .collect();
    let mut times = Vec::with_capacity(args.runs);
    let mut last = None;
    for _ in 0..args.runs {
        let t0 = std::time::Instant::now();
        let a = analyze(&t, &v, &Context::default());
        times.push(t0.elapsed().as_nanos() as u64);
        last = Some(a);
    }
    times.sort_unstable();
    let median_ns = times[times.len() / 2];
    let a = last.expect("at least one run");
    if args.json {
        let v = serde_json::json!({
            "workload": "analysis",
            "points": args.points,
            "runs": args.runs,
            "median_ns": median_ns,
            "min_ns": times[0],
            "max_ns": times[times.len() - 1],
            "verdict": a.verdict,
            "jumps": a.jumps,
            "quantum": a.quantum,
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "analysis  one channel of {} points ({:.1} h at 100 Hz), {} runs",
        thousands(args.points as u64),
        args.points as f64 / 360_000.0,
        args.runs
    );
    println!(
        "  median {}   min {}   max {}",
        nanos(median_ns),
        nanos(times[0]),
        nanos(times[times.len() - 1])
    );
    println!(
        "  verdict {} with {} jumps of {}",
        a.verdict.as_str(),
        a.jumps,
        a.quantum.map_or("–".into(), |q| format!("{q:.0} bytes"))
    );
    Ok(())
}

/// Channels of the shipped recordings whose verdicts are known, by reading
/// them: (file under `recordings/`, channel, verdict).
/// The seed's RSS moved +1.25 MiB in ten 0.25 MiB steps over ten minutes,
/// some of them down: too few effective readings for a trend at 99.9 %, and
/// past the evidence floor, so neither growth nor flat (`insufficient`).
const LABELLED: [(&str, &str, Verdict); 9] = [
    (
        "seed-linux-10min.flr",
        names::LOG_VM_RSS_MB,
        Verdict::Insufficient,
    ),
    (
        "seed-linux-10min.flr",
        "log.rss_delta_mb",
        Verdict::Insufficient,
    ),
    (
        "seed-linux-10min.flr",
        names::LOG_VRAM_ALLOC_MB,
        Verdict::Flat,
    ),
    (
        "seed-linux-10min.flr",
        names::LOG_VRAM_RESERVED_MB,
        Verdict::Flat,
    ),
    ("sample-soak-both-60s.flr", names::ALLOC_LIVE, Verdict::Flat),
    ("sample-soak-both-60s.flr", names::MEM_RSS, Verdict::Flat),
    (
        "sample-soak-both-60s.flr",
        names::MEM_VM_DATA,
        Verdict::Flat,
    ),
    ("sample-soak-both-60s.flr", names::MEM_VM_PTE, Verdict::Flat),
    (
        "sample-soak-both-60s.flr",
        names::MALLOC_ARENA,
        Verdict::Flat,
    ),
];

/// The median time, over `runs` runs, of one channel's analysis of an hour
/// at 100 Hz (a noisy staircase).
fn hour_median_ns(runs: usize) -> u64 {
    use flatline_analysis::{Context, analyze};
    let n: u64 = 360_000;
    let t: Vec<f64> = (0..n).map(|i| i as f64 / 100.0).collect();
    let v: Vec<f64> = (0..n)
        .map(|i| 1.3e9 + 262_144.0 * (i / 5000) as f64 + ((i * 7919) % 8192) as f64)
        .collect();
    let mut times: Vec<u64> = (0..runs)
        .map(|_| {
            let t0 = std::time::Instant::now();
            let _ = analyze(&t, &v, &Context::default());
            t0.elapsed().as_nanos() as u64
        })
        .collect();
    times.sort_unstable();
    times[times.len() / 2]
}

/// `bench analysis --corpus`: the analysis measured on series whose answer
/// is known. Prints the confusion matrix (rows: the right verdict; columns:
/// the one given), the series it got wrong, the slope errors of linear
/// series, and the time for an hour at 100 Hz.
fn run_corpus(args: &AnalysisBenchArgs) -> Result<()> {
    use flatline_corpus::{self as corpus, LEVEL_VERDICTS};
    let mut results: Vec<(String, Verdict, Verdict, usize, Option<f64>)> = Vec::new();
    // Per family: growing series their truth makes clear, and those found.
    let mut clear: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for c in corpus::generate() {
        let a = c.analyze();
        if c.clear() == Some(true) {
            let e = clear.entry(c.family).or_default();
            e.0 += 1;
            e.1 += usize::from(a.verdict.is_growth() && a.slope_per_s > 0.0);
        }
        let err = c
            .slope
            .filter(|_| {
                a.verdict == Verdict::Linear && !matches!(c.family, "ambiguous" | "threshold")
            })
            .map(|s| (a.slope_per_s / s - 1.0).abs());
        results.push((c.name, c.expected, a.verdict, c.t.len(), err));
    }
    let synthetic = results.len();
    let mut missing = Vec::new();
    for (file, channel, expected) in LABELLED {
        let path = std::path::Path::new("recordings").join(file);
        let Ok(rec) = flatline_telemetry::recording::Recording::open(&path) else {
            missing.push(file);
            continue;
        };
        let receipt = crate::commands::report::analyse(&rec, None);
        if let Some(r) = receipt.rows.iter().find(|r| r.spec.name == channel) {
            results.push((
                format!("{file}: {channel}"),
                expected,
                r.analysis.verdict,
                r.analysis.points,
                None,
            ));
        }
    }
    let right = results.iter().filter(|r| r.1 == r.2).count();
    let false_growth = results
        .iter()
        .filter(|r| matches!(r.1, Verdict::Flat | Verdict::Noisy) && r.3 >= 100 && r.2.is_growth())
        .count();
    let mut errs: Vec<f64> = results.iter().filter_map(|r| r.4).collect();
    errs.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        errs.get(((errs.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
    };
    // An hour at 100 Hz, timed.
    let median_ns = hour_median_ns(args.runs);
    if args.json {
        let v = serde_json::json!({
            "workload": "analysis-corpus",
            "series": results.len(),
            "synthetic": synthetic,
            "right": right,
            "share_right": right as f64 / results.len() as f64,
            "false_growth": false_growth,
            "slope_error_median": pick(0.5),
            "slope_error_p90": pick(0.9),
            "slope_error_max": errs.last(),
            "hour_at_100hz_median_ns": median_ns,
            "clear_by_family": clear.iter().map(|(f, (n, k))| serde_json::json!({
                "family": f, "clear": n, "found": k,
            })).collect::<Vec<_>>(),
            "wrong": results.iter().filter(|r| r.1 != r.2).map(|r| format!("{}: {:?} as {:?}", r.0, r.1, r.2)).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "analysis corpus  {} series ({synthetic} synthetic, {} channels of shipped recordings)",
        results.len(),
        results.len() - synthetic
    );
    if !missing.is_empty() {
        println!("  not found under recordings/: {}", missing.join(", "));
    }
    print!("\n  {:<14}", "right \\ given");
    for v in LEVEL_VERDICTS {
        print!("{:>13}", v.as_str());
    }
    println!();
    for want in LEVEL_VERDICTS {
        let row: Vec<usize> = LEVEL_VERDICTS
            .iter()
            .map(|got| {
                results
                    .iter()
                    .filter(|r| r.1 == want && r.2 == *got)
                    .count()
            })
            .collect();
        if row.iter().sum::<usize>() == 0 {
            continue;
        }
        print!("  {:<14}", want.as_str());
        for k in row {
            print!("{k:>13}");
        }
        println!();
    }
    println!(
        "\n  right: {right} of {} ({:.1} %); flat or noisy series of 100+ points called growth: {false_growth}",
        results.len(),
        100.0 * right as f64 / results.len() as f64
    );
    if let (Some(m), Some(p), Some(x)) = (pick(0.5), pick(0.9), errs.last()) {
        println!(
            "  slope error of {} linear series (trend ≥ 10× noise): median {:.3} %, p90 {:.3} %, max {:.3} %",
            errs.len(),
            m * 100.0,
            p * 100.0,
            x * 100.0
        );
    }
    println!(
        "\n  recall against the truth: growing series whose true rate is at least {} standard errors\n  \
         of its own slope (from the construction) and whose rise passes the evidence floor",
        corpus::CLEAR_Z
    );
    for (family, (n, k)) in &clear {
        println!(
            "    {family:<18}{k:>5} of {n:<5} found ({:.1} %)",
            100.0 * *k as f64 / (*n).max(1) as f64
        );
    }
    for r in results.iter().filter(|r| r.1 != r.2) {
        println!(
            "  wrong: {} is {}, given {}",
            r.0,
            r.1.as_str(),
            r.2.as_str()
        );
    }
    println!(
        "  one channel of an hour at 100 Hz: median {} over {} runs",
        nanos(median_ns),
        args.runs
    );
    Ok(())
}

/// `bench headlines`: every first sentence of the headline set, the
/// corpus and damaged copies of the set's recordings, judged claim by claim
/// against the truth; fails on a wrong claim, or a sentence that its own
/// receipt's body contradicts.
fn run_headlines(args: &crate::cli::HeadlinesBenchArgs) -> Result<()> {
    use crate::commands::headlines::{self, Outcome};
    let tmp = tempfile::tempdir().context("a folder for the damaged copies")?;
    let cases = headlines::evaluate_all(&args.dir, &args.corpus, tmp.path())?;
    let tally = headlines::tally(&cases);
    let all = tally.get("all").cloned().unwrap_or_default();
    // One write of it all: a reader that stops early (`| head`) ends the
    // output, never the program.
    use std::fmt::Write as _;
    let mut out = String::new();
    if args.json {
        let v = serde_json::json!({
            "workload": "headlines",
            "sets": tally,
            "cases": cases,
        });
        let _ = writeln!(out, "{v}");
    } else {
        let _ = writeln!(
            out,
            "first sentences judged  {} recordings ({}, {}), {} claims",
            all.recordings,
            args.dir.display(),
            args.corpus.display(),
            all.claims
        );
        let _ = writeln!(
            out,
            "\n  {:<12}{:>11}{:>8}{:>8}{:>7}{:>9}{:>10}",
            "set", "recordings", "claims", "right", "wrong", "missing", "disagree"
        );
        for (set, t) in &tally {
            let _ = writeln!(
                out,
                "  {set:<12}{:>11}{:>8}{:>8}{:>7}{:>9}{:>10}",
                t.recordings, t.claims, t.right, t.wrong, t.missing, t.disagree
            );
        }
        let _ = writeln!(out);
        for c in &cases {
            let bad: Vec<&headlines::Judged> = c
                .judged
                .iter()
                .filter(|j| args.verbose || j.outcome != Outcome::Right)
                .collect();
            if bad.is_empty() && c.disagrees.is_empty() && !args.verbose {
                continue;
            }
            let _ = writeln!(out, "  {} {}: {}", c.set, c.file, c.headline);
            for j in bad {
                let _ = writeln!(out, "      {:?} {}: {}", j.outcome, j.claim, j.detail);
            }
            for d in &c.disagrees {
                let _ = writeln!(out, "      disagrees with its body: {d}");
            }
        }
    }
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    if all.wrong > 0 || all.disagree > 0 {
        anyhow::bail!(
            "{} wrong claims and {} sentences that their own receipt contradicts",
            all.wrong,
            all.disagree
        );
    }
    Ok(())
}

/// `bench analysis --real`: the receipts of the corpus of real recordings
/// against their manifest's truth, per family and kind of channel.
fn run_real(args: &AnalysisBenchArgs) -> Result<()> {
    let outcomes = crate::commands::corpus::evaluate(&args.dir)?;
    let scores = crate::commands::corpus::score(&outcomes);
    if args.json {
        let families: Vec<serde_json::Value> = scores
            .iter()
            .map(|((family, kind), s)| {
                serde_json::json!({
                    "family": family, "kind": kind, "channels": s.channels,
                    "not_growing": s.not_growing, "false_alarms": s.false_alarms,
                    "growing": s.growing, "detectable": s.detectable,
                    "found": s.found, "missed": s.missed,
                    "clear": s.clear, "clear_found": s.clear_found,
                    "clear_recall": s.clear_recall(),
                })
            })
            .collect();
        let v = serde_json::json!({
            "workload": "analysis-real",
            "recordings": outcomes.iter().map(|o| &o.file).collect::<std::collections::BTreeSet<_>>().len(),
            "channels": outcomes.len(),
            "families": families,
            "labelled": outcomes.iter().map(|o| serde_json::json!({
                "file": o.file, "channel": o.channel, "class": format!("{:?}", o.class).to_lowercase(),
                "rate_per_s": o.rate_per_s, "verdict": o.verdict, "called_growth": o.called_growth,
                "detectable_per_s": o.detectable_per_s,
                "truth_z": o.truth_z.map(|z| if z.is_finite() { serde_json::json!(z) } else { serde_json::json!("inf") }),
            })).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(());
    }
    let files: std::collections::BTreeSet<&String> = outcomes.iter().map(|o| &o.file).collect();
    println!(
        "real corpus  {} recordings, {} labelled channels ({})",
        files.len(),
        outcomes.len(),
        args.dir.display()
    );
    println!(
        "\n  {:<26}{:<7}{:>9}{:>13}{:>7}{:>9}{:>12}{:>7}{:>8}{:>12}{:>7}{:>8}",
        "family",
        "kind",
        "channels",
        "flat/falling",
        "false",
        "growing",
        "detectable",
        "found",
        "missed",
        "clear z≥10",
        "found",
        "recall"
    );
    let mut total = crate::commands::corpus::Score::default();
    let line = |family: &str, kind: &str, s: &crate::commands::corpus::Score| {
        println!(
            "  {family:<26}{kind:<7}{:>9}{:>13}{:>7}{:>9}{:>12}{:>7}{:>8}{:>12}{:>7}{:>7.1}%",
            s.channels,
            s.not_growing,
            s.false_alarms,
            s.growing,
            s.detectable,
            s.found,
            s.missed,
            s.clear,
            s.clear_found,
            100.0 * s.clear_recall()
        );
    };
    for ((family, kind), s) in &scores {
        line(family, kind, s);
        total.add(s);
    }
    line("all", "", &total);
    println!(
        "\n  detectable: growth at least the rate its receipt says it could show; clear: growth whose\n  \
         true rate is at least {} standard errors of its own slope over the analysed span, from the\n  \
         recording's construction (the residuals around the true line, their lag-1 autocorrelation)",
        flatline_corpus::CLEAR_Z
    );
    for o in outcomes.iter().filter(|o| o.clear() && !o.called_growth) {
        println!(
            "  clear, not found: {} {} at {}/s (z {:.1}), given {}",
            o.file,
            o.channel,
            o.rate_per_s.map_or("–".into(), |r| format!("{r:.0}")),
            o.truth_z.unwrap_or(0.0),
            o.verdict
        );
    }
    for o in outcomes.iter().filter(|o| o.false_alarm() || o.missed()) {
        println!(
            "  {}: {} {} is {:?} at {}/s, given {} (slope {:.0}/s, detectable {})",
            if o.false_alarm() {
                "false alarm"
            } else {
                "missed"
            },
            o.file,
            o.channel,
            o.class,
            o.rate_per_s.map_or("–".into(), |r| format!("{r:.0}")),
            o.verdict,
            o.slope_per_s,
            o.detectable_per_s
                .map_or("none".into(), |d| format!("{d:.0}/s")),
        );
    }
    Ok(())
}

/// `bench analysis --delay`: the corpus replayed as it was recorded; per
/// family, the time to the first growth verdict against the statistical
/// limit, and false alarms on the way.
fn run_delay(args: &AnalysisBenchArgs) -> Result<()> {
    let (delays, alarms) = crate::commands::corpus::replay(&args.dir, args.step_s)?;
    let mut families: std::collections::BTreeMap<&str, Vec<&crate::commands::corpus::Delay>> =
        std::collections::BTreeMap::new();
    for d in &delays {
        families.entry(d.family.as_str()).or_default().push(d);
    }
    let med = |mut v: Vec<f64>| -> Option<f64> {
        v.retain(|x| x.is_finite());
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    if args.json {
        let v = serde_json::json!({
            "workload": "analysis-delay",
            "step_s": args.step_s,
            "channels": delays.iter().map(|d| serde_json::json!({
                "file": d.file, "family": d.family, "channel": d.channel,
                "rate_per_s": d.rate_per_s, "found_after_s": d.found_after_s,
                "limit_s": d.limit_s, "floor_s": d.floor_s,
            })).collect::<Vec<_>>(),
            "false_alarms": alarms.iter().filter(|a| !a.start_up).map(|a| serde_json::json!({
                "file": a.file, "family": a.family, "channel": a.channel, "at_s": a.at_s,
            })).collect::<Vec<_>>(),
            "during_start_up": alarms.iter().filter(|a| a.start_up).count(),
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "detection delay  {} growing channels replayed, a receipt every {} s ({})",
        delays.len(),
        args.step_s,
        args.dir.display()
    );
    println!(
        "\n  {:<22}{:>9}{:>7}{:>14}{:>14}{:>14}{:>16}{:>16}",
        "family",
        "channels",
        "found",
        "delay (med)",
        "limit (med)",
        "floor (med)",
        "delay/limit",
        "delay/bound"
    );
    for (family, ds) in &families {
        let found: Vec<&&crate::commands::corpus::Delay> =
            ds.iter().filter(|d| d.found_after_s.is_some()).collect();
        let delay = med(found.iter().filter_map(|d| d.found_after_s).collect());
        let limit = med(ds.iter().map(|d| d.limit_s).collect());
        let floor = med(ds.iter().map(|d| d.floor_s).collect());
        let ratio = med(found
            .iter()
            .map(|d| d.found_after_s.unwrap_or(f64::NAN) / d.limit_s)
            .collect());
        let bound = med(found
            .iter()
            .map(|d| d.found_after_s.unwrap_or(f64::NAN) / d.limit_s.max(d.floor_s))
            .collect());
        let f = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1} s"));
        let r = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.2}×"));
        println!(
            "  {family:<22}{:>9}{:>7}{:>14}{:>14}{:>14}{:>16}{:>16}",
            ds.len(),
            found.len(),
            f(delay),
            f(limit),
            f(floor),
            r(ratio),
            r(bound)
        );
    }
    println!(
        "\n  delay: seconds of data after the start-up at the first receipt that calls the channel growth;"
    );
    println!(
        "  limit: the shortest run that tells the rate from the channel's noise at 99.9 % (given its reading rate);"
    );
    println!(
        "  floor: the time the rate takes to pass the channel's evidence floor; bound: the larger of the two."
    );
    let (start_up, false_alarms): (Vec<_>, Vec<_>) = alarms.iter().partition(|a| a.start_up);
    println!(
        "  flat or falling channels called growth while their job was starting (true of those seconds): {} in {} recordings",
        start_up.len(),
        start_up
            .iter()
            .map(|a| &a.file)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    if false_alarms.is_empty() {
        println!("  false alarms after the start-up: none");
    }
    for a in false_alarms {
        println!(
            "  false alarm: {} {} ({}) called growth at {:.0} s",
            a.file, a.channel, a.family, a.at_s
        );
    }
    Ok(())
}
