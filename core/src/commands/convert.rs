//! `flatline import`, `export` and `synth`: a job's logs in, CSV out, synthetic runs.

use anyhow::{Context, Result};
use flatline_telemetry::recording::{csv, import};

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
            crate::fmt::given(from),
            crate::fmt::given(to)
        );
    }
    let range = csv::ExportRange {
        from_s: args.from,
        to_s: args.to,
        every_s: args.every,
    };
    // `-` is standard output, as for most tools that write a file; the
    // summary then goes to stderr, out of the CSV's way.
    let to_stdout = args.csv.as_os_str() == "-";
    let done = if to_stdout {
        let out = std::path::Path::new("standard output");
        csv::export_into(&args.file, out, std::io::stdout().lock(), range)
    } else {
        csv::export(&args.file, &args.csv, args.force, range)
    }
    .context("exporting")?;
    if let Some(t) = &done.scanned.tail {
        crate::commands::report::warn_tail(&args.file, t, done.scanned.samples);
    }
    let said = format!("wrote {} rows of {} channels to", done.rows, done.channels);
    if to_stdout {
        eprintln!("flatline: {said} standard output");
    } else {
        println!("{said} {}", args.csv.display());
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
        crate::fmt::bytes(bytes as f64),
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
        crate::fmt::bytes(done.bytes as f64),
        t0.elapsed().as_secs_f64(),
        done.digest
    );
    Ok(())
}
