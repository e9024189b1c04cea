//! The errors the run tells apart: one already said on stderr, and a bad
//! flag (exit 2).

/// An error whose cause has already been said on stderr: the run exits
/// non-zero without a second line.
#[derive(Debug, Clone, Copy)]
pub struct AlreadySaid;

impl std::fmt::Display for AlreadySaid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(said above)")
    }
}

impl std::error::Error for AlreadySaid {}

/// A flag that asks for something the run cannot do (a channel selector
/// that selects nothing, say), found after clap parsed it: exit 2, as
/// clap's own flag errors, never a run that passes by not looking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFlag(pub String);

impl std::fmt::Display for BadFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadFlag {}

/// The exit code of a bad flag (clap's, and [`BadFlag`]'s).
pub const EXIT_BAD_FLAG: u8 = 2;
