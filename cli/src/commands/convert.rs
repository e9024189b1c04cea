//! `flatline import`, `export` and `synth`: a job's logs in; CSV, pprof and
//! traces out; synthetic runs.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use flatline_telemetry::recording::{csv, import};

use flatline_export::{pprof, trace};

use crate::cli::{ExportArgs, ImportArgs, SynthArgs};

pub fn import(args: &ImportArgs) -> Result<()> {
    let done = import::import(
        &args.log,
        &args.out,
        args.force,
        std::env::args().collect(),
        args.step_pattern.clone(),
    )
    .context("importing")?;
    let rec = crate::commands::report::open(&args.out)?;
    for n in &rec.header.notes {
        eprintln!("flatline: note: {n}");
    }
    println!(
        "imported {} ({}): {} rows of {} channels into {} (sha256:{})",
        args.log.display(),
        done.format.name(),
        done.write.samples,
        rec.header.schema.len(),
        args.out.display(),
        done.write.digest
    );
    Ok(())
}

pub fn export(args: &ExportArgs) -> Result<()> {
    if let (Some(from), Some(to)) = (args.from, args.to)
        && from > to
    {
        anyhow::bail!(
            "--from {} is after --to {}: no sample lies between",
            flatline_receipt::fmt::given(from),
            flatline_receipt::fmt::given(to)
        );
    }
    if let Some(out) = &args.pprof {
        return export_pprof(args, out);
    }
    if let Some(out) = &args.perfetto {
        return export_trace(args, out, Trace::Perfetto);
    }
    if let Some(out) = &args.chrome {
        return export_trace(args, out, Trace::Chrome);
    }
    let Some(csv_out) = &args.csv else {
        // clap's group asks for exactly one output.
        anyhow::bail!("export: --csv, --pprof, --perfetto or --chrome OUT");
    };
    let range = csv::ExportRange {
        from_s: args.from,
        to_s: args.to,
        every_s: args.every,
    };
    // `-` is standard output, as for most tools that write a file; the
    // summary then goes to stderr, out of the CSV's way.
    let to_stdout = csv_out.as_os_str() == "-";
    let done = if to_stdout {
        let out = Path::new("standard output");
        csv::export_into(&args.file, out, std::io::stdout().lock(), range)
    } else {
        csv::export(&args.file, csv_out, args.force, range)
    }
    .context("exporting")?;
    if let Some(t) = &done.scanned.tail {
        crate::commands::report::warn_tail(&args.file, t, done.scanned.samples);
    }
    let said = format!("wrote {} rows of {} channels to", done.rows, done.channels);
    if to_stdout {
        eprintln!("flatline: {said} standard output");
    } else {
        println!("{said} {}", csv_out.display());
    }
    Ok(())
}

/// `export --pprof`: the sites as a heap profile. The recording is read
/// within the analysis budget (a week's is thinned: a window's edges then
/// fall on the readings kept, which the warning says).
fn export_pprof(args: &ExportArgs, out: &Path) -> Result<()> {
    refuse_existing(out, args.force)?;
    let rec = crate::commands::report::open(&args.file)?;
    let range = pprof::ProfileRange {
        from_s: args.from,
        to_s: args.to,
        pid: args.pid,
        growth: args.growth,
    };
    let profile = pprof::from_recording(&rec, range)?;
    write_new(out, &pprof::encode(&profile), args.force)?;
    let held: i64 = profile.samples.iter().map(|s| s.values[3]).sum();
    let n = profile.samples.len();
    println!(
        "wrote {n} allocation site{} ({} {}) to {}",
        if n == 1 { "" } else { "s" },
        flatline_receipt::fmt::bytes(held as f64),
        if args.growth { "gained" } else { "held" },
        out.display()
    );
    Ok(())
}

#[derive(Clone, Copy)]
enum Trace {
    Perfetto,
    Chrome,
}

/// `export --perfetto` / `--chrome` (`--merge`): the recording read whole
/// (a trace is every sample and every step: a thinned load would drop
/// steps).
fn export_trace(args: &ExportArgs, out: &Path, kind: Trace) -> Result<()> {
    refuse_existing(out, args.force)?;
    // Read the other trace first: a bad one costs no pass over the recording.
    let other = match &args.merge {
        Some(m) => {
            let text = std::fs::read(m).with_context(|| format!("reading {}", m.display()))?;
            let v: serde_json::Value = serde_json::from_slice(&text)
                .with_context(|| format!("{} is not JSON", m.display()))?;
            Some(v)
        }
        None => None,
    };
    let rec = crate::commands::report::open_within(&args.file, usize::MAX)?;
    let range = trace::TraceRange {
        from_s: args.from,
        to_s: args.to,
        pid: args.pid,
    };
    let bytes = match (kind, other) {
        (Trace::Perfetto, _) => trace::perfetto(&rec, range),
        (Trace::Chrome, None) => serde_json::to_vec(&trace::chrome(&rec, range))?,
        (Trace::Chrome, Some(other)) => {
            let m = args.merge.as_deref().unwrap_or(Path::new("-"));
            let doc = trace::merge(&rec, range, other)
                .with_context(|| format!("merging {}", m.display()))?;
            serde_json::to_vec(&doc)?
        }
    };
    write_new(out, &bytes, args.force)?;
    println!(
        "wrote {} ({}) to {}",
        match (kind, &args.merge) {
            (Trace::Perfetto, _) => "a Perfetto trace".to_owned(),
            (Trace::Chrome, None) => "a Chrome trace".to_owned(),
            (Trace::Chrome, Some(m)) => format!("a Chrome trace merged with {}", m.display()),
        },
        flatline_receipt::fmt::bytes(bytes.len() as f64),
        out.display()
    );
    Ok(())
}

/// An error before any work if `out` exists and may not be overwritten.
fn refuse_existing(out: &Path, force: bool) -> Result<()> {
    if !force && out.exists() {
        anyhow::bail!("{} exists: --force to overwrite it", out.display());
    }
    Ok(())
}

/// `bytes` into `out` whole or not at all: written beside it and renamed
/// over it (without `force`, never over a file that appeared meanwhile).
fn write_new(out: &Path, bytes: &[u8], force: bool) -> Result<()> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("writing into {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", out.display()))?;
    if force {
        tmp.persist(out)
            .map_err(|e| e.error)
            .with_context(|| format!("writing {}", out.display()))?;
    } else {
        tmp.persist_noclobber(out)
            .map_err(|e| e.error)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// `flatline synth --fleet N`: a recording per rank of one job.
fn synth_fleet(args: &SynthArgs, ranks: usize) -> Result<()> {
    use flatline_telemetry::recording::synth;
    if let Some(&k) = args.leak.iter().find(|&&k| k >= ranks) {
        anyhow::bail!("--leak {k}: the fleet's ranks are 0 to {}", ranks - 1);
    }
    let samples = args.hours * 3600.0 * args.hz * ranks as f64;
    if samples > 1e9 {
        anyhow::bail!("{samples:.0} samples is more than a billion: fewer --hours or a lower --hz");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let cfg = synth::FleetConfig {
        ranks,
        hours: args.hours,
        hz: args.hz,
        seed: args.seed,
        leaking: args.leak.clone(),
    };
    let t0 = std::time::Instant::now();
    let mut bytes = 0;
    for k in 0..ranks {
        let node = k / synth::FLEET_RANKS_PER_NODE;
        let mut setup = flatline_telemetry::recording::RecordingSetup::new("synth");
        setup
            .set("hours", args.hours)
            .set("hz", args.hz)
            .set("seed", args.seed)
            .set("fleet", ranks);
        setup
            .notes
            .push("synthetic: made by flatline synth --fleet, not measured".into());
        setup.host.hostname = format!("node-{node}");
        for (key, v) in [
            ("rank", k),
            ("local_rank", k % synth::FLEET_RANKS_PER_NODE),
            ("node_rank", node),
            ("world_size", ranks),
        ] {
            setup.labels.insert(key.into(), v.to_string());
        }
        let out = args.out.join(format!("rank-{k:04}.flr"));
        let done = synth::write_rank(&cfg, k, &out, args.force, |schema| {
            let mut h = setup.header(schema, Vec::new());
            // Nodes' clocks and start-ups disagree by seconds.
            h.started_unix_ms = 1_790_000_000_000 + 1_000 * node as u64 + 137 * k as u64;
            h
        })
        .with_context(|| format!("writing {}", out.display()))?;
        bytes += done.bytes;
    }
    println!(
        "wrote {ranks} recordings into {} ({}) in {:.1} s",
        args.out.display(),
        flatline_receipt::fmt::bytes(bytes as f64),
        t0.elapsed().as_secs_f64(),
    );
    Ok(())
}

/// `flatline synth`: a synthetic recording, with a progress line when done.
pub fn synth(args: &SynthArgs) -> Result<()> {
    use flatline_telemetry::recording::synth;
    if let Some(n) = args.fleet {
        return synth_fleet(args, usize::from(n));
    }
    let cfg = synth::SynthConfig {
        hours: args.hours,
        hz: args.hz,
        channels: usize::from(args.channels),
        seed: args.seed,
    };
    let samples = args.hours * 3600.0 * args.hz;
    if samples > 1e9 {
        anyhow::bail!("{samples:.0} samples is more than a billion: fewer --hours or a lower --hz");
    }
    let mut setup = flatline_telemetry::recording::RecordingSetup::new("synth");
    setup
        .set("hours", args.hours)
        .set("hz", args.hz)
        .set("channels", args.channels)
        .set("seed", args.seed);
    setup
        .notes
        .push("synthetic: made by flatline synth, not measured".into());
    let t0 = std::time::Instant::now();
    let done = synth::write(cfg, &args.out, args.force, |schema| {
        setup.header(schema, Vec::new())
    })
    .context("writing the synthetic recording")?;
    println!(
        "wrote {} ({} samples, {}) in {:.1} s; sha256:{}",
        args.out.display(),
        done.samples,
        flatline_receipt::fmt::bytes(done.bytes as f64),
        t0.elapsed().as_secs_f64(),
        done.digest
    );
    Ok(())
}
