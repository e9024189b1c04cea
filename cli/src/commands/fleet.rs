//! `flatline fleet`: many recordings of one job, one per rank or node, and
//! which of them is different. Each recording is read and analysed one
//! after another (so the memory held is one recording's); what the fleet
//! judges is in `flatline_analysis::fleet`, its words in
//! `flatline_receipt::fleet`. This file finds the files, reads them and
//! prints.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use flatline_receipt::fleet::{Fleet, Member, json, md, text};

use crate::cli::{FleetArgs, ReportFormat};
use flatline_receipt::fmt::thousands;

/// The recordings named: files as given, folders as the `.flr` files in
/// them, by name.
pub fn files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        if a.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(a)
                .with_context(|| format!("reading the folder {}", a.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .is_some_and(|x| x == flatline_telemetry::recording::EXTENSION)
                })
                .collect();
            if found.is_empty() {
                anyhow::bail!("{} holds no recordings (*.flr)", a.display());
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(a.clone());
        }
    }
    Ok(out)
}

/// Reads one recording within `budget` bytes of samples (warning on
/// stderr of a bad tail or damage, as `report` does).
fn member(path: &Path, budget: usize) -> Member {
    match crate::commands::report::open_within(path, budget) {
        Ok(rec) => Member::of(path, &rec),
        Err(e) => Member::unread(path, format!("{e:#}")),
    }
}

/// Reads and compares the recordings, one at a time within `budget` bytes.
pub fn read(paths: &[PathBuf], budget: usize) -> Fleet {
    Fleet::of(paths.iter().map(|p| member(p, budget)).collect())
}

pub fn run(args: &FleetArgs, viewer: &dyn crate::Viewer) -> Result<()> {
    let windowed = args.window || args.screenshot.is_some();
    if windowed {
        viewer.check_display()?;
    }
    let paths = files(&args.files)?;
    let f = read(&paths, (args.memory_mib as usize) << 20);
    let n = f.members.len();
    let bad: Vec<String> = f
        .members
        .iter()
        .filter(|m| m.error.is_some())
        .map(|m| m.file.display().to_string())
        .collect();
    if windowed {
        viewer.fleet(args, f)?;
    } else {
        match args.format {
            ReportFormat::Text => print!("{}", text(&f)),
            ReportFormat::Md => print!("{}", md(&f)),
            ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&json(&f))?),
        }
    }
    if let Some(first) = bad.first() {
        anyhow::bail!(
            "{} of {n} recordings could not be read (the first: {first})",
            thousands(bad.len() as u64),
        );
    }
    Ok(())
}
