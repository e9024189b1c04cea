//! `flatline import` and `flatline export`: a job's logs in, CSV out.

use anyhow::{Context, Result};
use flatline_runtime::recording::{csv, import};

use crate::cli::{ExportArgs, ImportArgs};

pub fn import(args: &ImportArgs) -> Result<()> {
    let done = import::import(
        &args.log,
        &args.out,
        args.force,
        std::env::args().collect(),
        args.step_pattern.clone(),
    )
    .with_context(|| format!("importing {}", args.log.display()))?;
    let rec = crate::report::open(&args.out)?;
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
    let rec = crate::report::open(&args.file)?;
    let rows = csv::export(&rec, &args.csv, args.force)
        .with_context(|| format!("exporting {}", args.file.display()))?;
    println!(
        "wrote {rows} rows of {} channels to {}",
        rec.header.schema.len(),
        args.csv.display()
    );
    Ok(())
}
