//! Command-line grammar. The names here are the user-facing contract of
//! DESIGN.md: keep them stable, add freely.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use flatline_runtime::workload::ingest::DEFAULT_CORPUS_TOKENS;

#[derive(Debug, Parser)]
#[command(
    name = "flatline",
    version,
    about = "Measure memory drift of ML workloads: zero-allocation reference workloads, \
             allocator/page-table/VRAM telemetry, recordings and receipts.",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Time a reference workload and print its figures beside its baseline.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The 1-billion-operation ring arena (65,536 × 64-byte orders).
    Ops1b(Ops1bArgs),
    /// nanoGPT-style batch token ingestion: the zero-allocation arena beside an
    /// allocating per-sample loader.
    Ingest(IngestArgs),
}

#[derive(Debug, Clone, Args)]
pub struct Ops1bArgs {
    /// Operations to run.
    #[arg(long, default_value_t = 1_000_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: u64,
    /// Sample telemetry at this rate while the bench runs (0: off).
    #[arg(long, value_name = "HZ", default_value_t = 0.0, value_parser = rate)]
    pub telemetry_hz: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct IngestArgs {
    /// Rows per batch (B).
    #[arg(long, default_value_t = 64, value_parser = positive)]
    pub batch: usize,
    /// Tokens per row (T).
    #[arg(long, default_value_t = 256, value_parser = positive)]
    pub block: usize,
    /// Token file to memory-map: little-endian u16s, nanoGPT's train.bin layout.
    #[arg(long, value_name = "FILE", conflicts_with = "corpus_tokens")]
    pub corpus: Option<PathBuf>,
    /// Size of the generated corpus, in tokens (values below 168), when no --corpus is given.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CORPUS_TOKENS, value_parser = positive)]
    pub corpus_tokens: usize,
    /// Timed batches per loader.
    #[arg(long, default_value_t = 20_000, value_parser = positive)]
    pub iters: usize,
    /// Untimed warm-up batches per loader.
    #[arg(long, default_value_t = 1_000)]
    pub warmup: usize,
    /// Seed of the batch offsets; a generated corpus is drawn from SEED+1.
    #[arg(long, default_value_t = 1337)]
    pub seed: u64,
    /// Skip the allocating baseline loader.
    #[arg(long)]
    pub no_baseline: bool,
    /// Sample telemetry at this rate while the bench runs (0: off).
    #[arg(long, value_name = "HZ", default_value_t = 0.0, value_parser = rate)]
    pub telemetry_hz: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// A sampling rate: 0 (off) or up to 10 kHz.
fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(hz) if (0.0..=10_000.0).contains(&hz) => Ok(hz),
        Ok(_) => Err("must be between 0 (off) and 10000".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_follow_the_seed_workloads() {
        let cli = Cli::try_parse_from(["flatline", "bench", "ingest"]).unwrap();
        let Some(Command::Bench(BenchCommand::Ingest(a))) = cli.command else {
            panic!("parsed as {cli:?}")
        };
        assert_eq!((a.batch, a.block, a.iters), (64, 256, 20_000));
        assert_eq!(a.corpus_tokens, 16_671_459);
        assert!(a.corpus.is_none() && !a.no_baseline && !a.json);
        let cli = Cli::try_parse_from(["flatline", "bench", "ops1b", "--json"]).unwrap();
        let Some(Command::Bench(BenchCommand::Ops1b(a))) = cli.command else {
            panic!("parsed as {cli:?}")
        };
        assert_eq!(a.ops, 1_000_000_000);
        assert!(a.json);
        assert!(Cli::try_parse_from(["flatline"]).unwrap().command.is_none());
    }

    #[test]
    fn bad_flags_are_rejected() {
        for args in [
            &["flatline", "bench", "ops1b", "--ops", "0"][..],
            &["flatline", "bench", "ops1b", "--ops", "many"],
            &["flatline", "bench", "ingest", "--batch", "0"],
            &["flatline", "bench", "ingest", "--block", "-3"],
            &[
                "flatline",
                "bench",
                "ingest",
                "--corpus",
                "a.bin",
                "--corpus-tokens",
                "9",
            ],
            &["flatline", "bench", "fastest"],
            &["flatline", "bench", "ops1b", "--telemetry-hz", "-1"],
            &["flatline", "bench", "ops1b", "--telemetry-hz", "1e9"],
            &["flatline", "bench", "ingest", "--telemetry-hz", "fast"],
            &["flatline", "--frobnicate"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?} was accepted");
        }
    }
}
