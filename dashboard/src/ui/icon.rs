//! The window icon, drawn in code: a monitor trace that blips once and then
//! runs flat, on a dark rounded square. No image file to ship or decode.

/// Side of the icon in pixels (a multiple of 4, as window systems want).
pub const SIZE: u32 = 64;

const BACKGROUND: [u8; 3] = [0x1b, 0x1d, 0x21];
const TRACE: [u8; 3] = [0x4c, 0xd1, 0x6e];

/// The trace, in pixel coordinates of a 64 × 64 icon.
const TRACE_POINTS: [(f32, f32); 7] = [
    (8.0, 38.0),
    (20.0, 38.0),
    (25.0, 18.0),
    (31.0, 48.0),
    (35.0, 34.0),
    (38.0, 38.0),
    (56.0, 38.0),
];

/// Distance from `p` to the segment `a`–`b`.
fn distance(p: (f32, f32), a: (f32, f32), b: (f32, f32)) -> f32 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let t = (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
    ((p.0 - a.0 - t * dx).powi(2) + (p.1 - a.1 - t * dy).powi(2)).sqrt()
}

/// Coverage (0..1) of a shape whose signed distance at a pixel centre is `d`.
fn coverage(d: f32) -> f32 {
    (0.5 - d).clamp(0.0, 1.0)
}

/// Unpremultiplied RGBA pixels, row by row.
pub fn rgba() -> Vec<u8> {
    let s = SIZE as f32;
    let (radius, half_width) = (12.0, 2.5);
    let mut out = Vec::with_capacity((SIZE * SIZE * 4) as usize);
    for y in 0..SIZE {
        for x in 0..SIZE {
            let p = (x as f32 + 0.5, y as f32 + 0.5);
            // Rounded square: distance outside the corner circles' inner box.
            let qx = (p.0 - s / 2.0).abs() - (s / 2.0 - radius);
            let qy = (p.1 - s / 2.0).abs() - (s / 2.0 - radius);
            let outside = qx.max(0.0).hypot(qy.max(0.0)) + qx.max(qy).min(0.0) - radius;
            let fill = coverage(outside);
            let line = TRACE_POINTS
                .windows(2)
                .map(|w| distance(p, w[0], w[1]))
                .fold(f32::INFINITY, f32::min);
            let ink = coverage(line - half_width) * fill;
            for c in 0..3 {
                let v = f32::from(BACKGROUND[c]) * (1.0 - ink) + f32::from(TRACE[c]) * ink;
                out.push(v.round() as u8);
            }
            out.push((fill * 255.0).round() as u8);
        }
    }
    out
}

/// The icon for `egui::ViewportBuilder::with_icon`.
pub fn icon() -> eframe::egui::IconData {
    eframe::egui::IconData {
        rgba: rgba(),
        width: SIZE,
        height: SIZE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn px(img: &[u8], x: u32, y: u32) -> [u8; 4] {
        let i = ((y * SIZE + x) * 4) as usize;
        [img[i], img[i + 1], img[i + 2], img[i + 3]]
    }

    #[test]
    fn a_flat_trace_on_a_rounded_square() {
        let img = rgba();
        assert_eq!(img.len(), (SIZE * SIZE * 4) as usize);
        assert_eq!(px(&img, 0, 0)[3], 0, "corners are cut");
        assert_eq!(px(&img, 63, 63)[3], 0);
        assert_eq!(px(&img, 32, 4), [0x1b, 0x1d, 0x21, 255], "background");
        assert_eq!(px(&img, 48, 37), [0x4c, 0xd1, 0x6e, 255], "the flat run");
        assert_eq!(px(&img, 25, 20)[1], 0xd1, "the blip's peak");
        assert_eq!(px(&img, 48, 44), [0x1b, 0x1d, 0x21, 255], "below the line");
        // Anti-aliased: the line's edge is between the two colours.
        let edge = px(&img, 48, 40)[1];
        assert!(edge > 0x1d && edge < 0xd1, "{edge}");
        if let Ok(path) = std::env::var("FLATLINE_SAVE_ICON_PNG") {
            // For a person to look at: FLATLINE_SAVE_ICON_PNG=/tmp/icon.png cargo test …
            image::RgbaImage::from_raw(SIZE, SIZE, img)
                .unwrap()
                .save(path)
                .unwrap();
        }
    }
}
