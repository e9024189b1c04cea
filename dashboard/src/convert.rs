//! `flatline import` and `flatline export`: step-log CSVs in and out.

use anyhow::{Context, Result};
use flatline_runtime::recording::csv;

use crate::cli::{ExportArgs, ImportArgs};

pub fn import(args: &ImportArgs) -> Result<()> {
    let summary = csv::import(&args.csv, &args.out, args.force, std::env::args().collect())
        .with_context(|| format!("importing {}", args.csv.display()))?;
    let rec = crate::report::open(&args.out)?;
    for n in &rec.header.notes {
        eprintln!("flatline: note: {n}");
    }
    println!(
        "imported {} rows of {} channels into {} (sha256:{})",
        summary.samples,
        rec.header.schema.len(),
        args.out.display(),
        summary.digest
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
