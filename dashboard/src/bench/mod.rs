//! The window's benchmarks, `bench ui` and `bench window`: commands of the
//! dashboard, so they take the command line's arguments; the window they
//! measure takes plain settings.

pub mod ui;
pub mod window;
