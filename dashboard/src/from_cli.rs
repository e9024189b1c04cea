//! The command line's window arguments turned into the window's options
//! (plain values), once, so nothing under `ui` names the CLI's types.

use flatline_cli::cli::{RendererArg, WindowArgs};

use crate::ui;

/// What the command line asked of a window (`--fps`, `--renderer`).
pub fn asked(w: &WindowArgs) -> ui::WindowAsked {
    ui::WindowAsked {
        fps: w.fps,
        renderer: w.renderer.map(renderer),
    }
}

/// The renderer `--renderer` names.
pub fn renderer(r: RendererArg) -> ui::Renderer {
    match r {
        RendererArg::Glow => ui::Renderer::Glow,
        RendererArg::Wgpu => ui::Renderer::Wgpu,
    }
}
