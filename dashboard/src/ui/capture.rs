//! Screenshots: a few frames to settle, the capture, then the PNG (the
//! dashboard's and the fleet's windows; `--screenshot` and the "Screenshot"
//! button).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};
use eframe::egui;

/// A screenshot being taken: a few frames to settle, then the capture, then
/// the PNG (the dashboard's and the fleet's windows).
#[derive(Debug)]
pub(crate) struct Capture {
    path: PathBuf,
    settle_frames: u32,
    requested: bool,
    exit_after: bool,
    image: Arc<Mutex<Option<Arc<egui::ColorImage>>>>,
}

impl Capture {
    pub(crate) fn new(path: PathBuf, exit_after: bool) -> Self {
        Self {
            path,
            settle_frames: 3,
            requested: false,
            exit_after,
            image: Arc::default(),
        }
    }

    /// One frame of it: `Some` once the PNG is written (or could not be),
    /// after which the window closes if it was asked to.
    pub(crate) fn step(&mut self, ctx: &egui::Context) -> Option<Result<PathBuf, String>> {
        if let Some(img) = self.image.lock().expect("screenshot lock").take() {
            let result = save_png(&img, &self.path)
                .map(|()| self.path.clone())
                .map_err(|e| format!("{e:#}"));
            if self.exit_after {
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
            return Some(result);
        }
        if self.settle_frames > 0 {
            self.settle_frames -= 1;
            ctx.request_repaint();
        } else if !self.requested {
            self.requested = true;
            let slot = self.image.clone();
            let repaint = ctx.clone();
            ctx.request_screenshot(move |img| {
                *slot.lock().expect("screenshot lock") = Some(img);
                repaint.request_repaint();
            });
        }
        None
    }
}

/// Outcome of a screenshot, shared with the command line.
pub type ShotResult = Arc<Mutex<Option<Result<PathBuf, String>>>>;

/// Writes an egui image as PNG.
pub fn save_png(img: &egui::ColorImage, path: &Path) -> Result<()> {
    let [w, h] = img.size;
    let bytes: Vec<u8> = img.pixels.iter().flat_map(|c| c.to_array()).collect();
    image::save_buffer(
        path,
        &bytes,
        w as u32,
        h as u32,
        image::ExtendedColorType::Rgba8,
    )
    .with_context(|| format!("writing {}", path.display()))
}
