//! `flatline`: measure memory drift of ML workloads.

use std::process::ExitCode;

use clap::Parser;

// Every allocation of the process goes through the counter, so the benches can
// prove their timed loops allocate nothing and alloc.* has something to show.
#[global_allocator]
static ALLOC: flatline_arena::arena::CountingAlloc = flatline_arena::arena::CountingAlloc;

fn main() -> ExitCode {
    flatline_dashboard::run(flatline_cli::cli::Cli::parse())
}
