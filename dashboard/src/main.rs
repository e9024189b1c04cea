//! `flatline`: the command line (and, later, the dashboard) of flatline.

use std::process::ExitCode;

use clap::Parser;

mod bench;
mod cli;
mod convert;
mod fmt;
mod report;
mod session;
mod soak;

// Every allocation of the process goes through the counter, so the benches can
// prove their timed loops allocate nothing.
#[global_allocator]
static ALLOC: flatline_runtime::arena::CountingAlloc = flatline_runtime::arena::CountingAlloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        None => bench::run_default(),
        Some(cli::Command::Bench(args)) => bench::run(args),
        Some(cli::Command::Soak(args)) => soak::run(&args),
        Some(cli::Command::Report(args)) => report::run(&args),
        Some(cli::Command::Import(args)) => convert::import(&args),
        Some(cli::Command::Export(args)) => convert::export(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // `{:#}` puts anyhow's context chain on one line: "opening corpus x: No such file".
            eprintln!("flatline: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
