//! A run's samples on their way: a session (sampler, recorder, exporter;
//! [`session`]), the window's sources that follow a recording or a child
//! ([`source`]), the store they fill ([`store`]) and its detail queries
//! ([`detail`]), and the marks a job or a person sends into it ([`mark`]).
//! Plain settings in, no CLI types.

pub mod detail;
pub mod mark;
pub mod session;
pub mod source;
pub mod store;
