//! The commands: each takes its parsed arguments from [`crate::cli`] and
//! runs, on the streams of [`crate::stream`] and the exporter of
//! [`crate::export`]. Only this layer, [`crate::cli`] and the crate's root
//! name clap's types (CI's `scripts/check-layers.py` checks it).

pub mod bench;
pub mod compare;
pub mod convert;
pub mod corpus;
pub mod fleet;
pub mod headlines;
pub mod live;
pub mod replay;
pub mod report;
pub mod soak;
pub mod watch;
