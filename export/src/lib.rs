//! What flatline hands to other tools. A running session serves Prometheus
//! metrics ([`prom`]) and the alerts read from them ([`alert`]), over an
//! HTTP server ([`http`]) behind its TLS and basic-auth door ([`web`]), and
//! its allocation profile as pprof ([`pprof`]), and pushes its metrics to
//! an OpenTelemetry collector ([`otlp`]); a recording is written as
//! pprof or as a Perfetto or Chrome trace ([`trace`]). Plain settings in, no
//! CLI types. Below them all: `--channels` patterns ([`select`]) and the
//! two errors every command tells apart ([`AlreadySaid`], [`BadFlag`]),
//! which the stream and the command line use too.

pub mod alert;
pub mod http;
pub mod otlp;
pub mod pprof;
pub mod prom;
pub mod trace;
pub mod web;

pub mod select;

mod error;
pub use error::{AlreadySaid, BadFlag, EXIT_BAD_FLAG};
