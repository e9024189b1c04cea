//! `flatline bench`: run a reference workload and print its figures.

use anyhow::{Context, Result};
use flatline_runtime::workload::ingest::{
    self, Corpus, CorpusSource, FillStats, IngestBenchConfig,
};
use flatline_runtime::workload::ops1b::{self, RING_SLOTS};

use crate::cli::{BenchCommand, IngestArgs, Ops1bArgs};
use crate::fmt::{nanos, thousands};

/// Checksums of `ops1b` from a fresh ring, known independently (C reference).
const KNOWN_OPS1B: [(u64, u64); 2] = [
    (300_000_000, 7_851_891_676),
    (1_000_000_000, 25_689_187_392),
];

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Ops1b(args) => run_ops1b(&args),
        BenchCommand::Ingest(args) => run_ingest(&args),
    }
}

/// What bare `flatline` does until the dashboard exists: both benches with defaults.
pub fn run_default() -> Result<()> {
    eprintln!(
        "flatline: the live dashboard is not built yet; running `flatline bench ops1b` and \
         `flatline bench ingest` with their defaults instead (see `flatline --help`).\n"
    );
    run_ops1b(&Ops1bArgs {
        ops: 1_000_000_000,
        json: false,
    })?;
    println!();
    run_ingest(&IngestArgs {
        batch: 64,
        block: 256,
        corpus: None,
        corpus_tokens: ingest::DEFAULT_CORPUS_TOKENS,
        iters: 20_000,
        warmup: 1_000,
        seed: 1337,
        no_baseline: false,
        json: false,
    })
}

fn run_ops1b(args: &Ops1bArgs) -> Result<()> {
    let r = ops1b::bench(args.ops).context("setting up the ops1b ring")?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
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
    println!(
        "ops1b  {} ops over a ring of {} × 64-byte orders ({} MiB)",
        thousands(r.ops),
        thousands(RING_SLOTS as u64),
        (RING_SLOTS * 64) >> 20
    );
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
        None => Corpus::generate(args.corpus_tokens, args.seed.wrapping_add(1)),
    };
    let cfg = IngestBenchConfig {
        batch: args.batch,
        block: args.block,
        iters: args.iters,
        warmup: args.warmup,
        seed: args.seed,
        baseline: !args.no_baseline,
    };
    let r = ingest::bench(&corpus, &cfg).context("running the ingest bench")?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
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
    if let Some(b) = &r.baseline {
        row("baseline", b);
        println!(
            "  baseline / arena at p50: {:.1}×",
            b.fill_ns_p50 as f64 / r.fill_ns_p50.max(1) as f64
        );
    }
    Ok(())
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
