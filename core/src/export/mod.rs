//! What a running session serves: Prometheus metrics ([`prom`]) and the
//! alerts read from them ([`alert`]), over an HTTP server ([`http`]) behind
//! its TLS and basic-auth door ([`web`]). Plain settings in, no CLI types.

pub mod alert;
pub mod http;
pub mod prom;
pub mod web;
