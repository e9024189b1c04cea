//! flatline's receipts, headless: what a recording's analysis says and how
//! it is laid out. `report` decides a receipt's content (verdicts,
//! headline, findings, the process tree) from a [`Recording`]; `render`
//! lays it out as terminal text or Markdown and writes the numbers of its
//! JSON; `fmt` writes bytes, durations and counts as a person reads them.
//!
//! The CLI (`flatline-cli`) and the Python module (`flatline-python`) both
//! build on this crate; it pulls in no CLI parser, no server stack and no
//! GUI (CI checks its `cargo tree` against an allow-list).
//!
//! [`Recording`]: flatline_format::Recording

pub mod compare;
pub mod damage;
pub mod fleet;
pub mod fmt;
pub mod render;
pub mod report;
pub mod text;
