//! Every text the window draws is readable: rendered with egui_kittest at
//! the sizes people use, no two texts overprint and none is cut by the space
//! it is drawn in, for every recording shipped in `recordings/` and for the
//! compare view.

mod support;

use std::path::{Path, PathBuf};

use eframe::egui::{self, Rect, Shape};
use egui_kittest::Harness;
use flatline_dashboard::ui::{Align, Dashboard, ReplaySource, Settings, Source};

/// The sizes checked: the one screenshots are taken at, and the smallest
/// the window promises to stay readable at.
const SIZES: [[f32; 2]; 2] = [[1600.0, 1000.0], [1280.0, 800.0]];

fn frame(ui: &mut egui::Ui, d: &mut Dashboard) {
    d.tick();
    d.show(ui);
}

/// A text as drawn: its glyphs' bounds and the rectangle it was clipped to.
#[derive(Debug)]
struct Drawn {
    text: String,
    glyphs: Rect,
    clip: Rect,
}

impl Drawn {
    /// The part of it that shows.
    fn shown(&self) -> Rect {
        self.glyphs.intersect(self.clip)
    }
}

/// The texts of `shape`, a line at a time (a label that wraps after other
/// widgets on its line starts its first row to their right).
fn texts(shape: &Shape, clip: Rect, out: &mut Vec<Drawn>) {
    match shape {
        Shape::Vec(v) => v.iter().for_each(|s| texts(s, clip, out)),
        Shape::Text(t) if t.angle != 0.0 => out.push(Drawn {
            text: t.galley.text().to_owned(),
            glyphs: t.visual_bounding_rect(),
            clip,
        }),
        Shape::Text(t) => {
            for row in &t.galley.rows {
                if row.row.glyphs.iter().all(|g| g.chr.is_whitespace()) {
                    continue;
                }
                let at = t.pos.to_vec2() + row.pos.to_vec2();
                out.push(Drawn {
                    text: row.row.glyphs.iter().map(|g| g.chr).collect(),
                    glyphs: row.row.visuals.mesh_bounds.translate(at),
                    clip,
                });
            }
        }
        _ => {}
    }
}

/// Every text the last frame drew that shows at all.
fn drawn<S>(h: &Harness<'_, S>) -> Vec<Drawn> {
    let mut out = Vec::new();
    for c in &h.output().shapes {
        texts(&c.shape, c.clip_rect, &mut out);
    }
    out.retain(|d| d.shown().is_positive());
    out
}

/// What is wrong with a frame's texts: pairs that overprint, and texts cut
/// at the side by their space (half a pixel of antialiasing allowed). The
/// plots scroll up and down: a line half out of view at a scroll edge is
/// scrolled, not cut.
fn problems(texts: &[Drawn]) -> Vec<String> {
    let mut found = Vec::new();
    for d in texts {
        let (g, c) = (d.glyphs, d.clip.expand(0.5));
        if g.min.x < c.min.x || g.max.x > c.max.x {
            found.push(format!(
                "{:?} is cut: drawn at {:?}, its space is {:?}",
                d.text, d.glyphs, d.clip
            ));
        }
    }
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            let both = a.shown().intersect(b.shown());
            if both.width() > 0.5 && both.height() > 0.5 {
                found.push(format!(
                    "{:?} {:?} and {:?} {:?} overprint",
                    a.text, a.glyphs, b.text, b.glyphs
                ));
            }
        }
    }
    found
}

/// Renders `dash` at `size` until its analyses have landed, then the
/// problems of the frame drawn.
fn check(dash: Dashboard, size: [f32; 2]) -> Vec<String> {
    let mut h = Harness::builder()
        .with_size(size)
        .build_ui_state(frame, dash);
    h.run_steps(1);
    let pending =
        |d: &Dashboard| d.store.unanalysed() + d.other.as_ref().map_or(0, |o| o.store.unanalysed());
    for _ in 0..1000 {
        if pending(h.state()) == 0 {
            break;
        }
        h.run_steps(1);
    }
    // A layout judged before its analyses landed judged the wrong frame.
    assert_eq!(
        pending(h.state()),
        0,
        "analyses still pending after 1000 frames"
    );
    h.run_steps(2);
    problems(&drawn(&h))
}

fn replay(path: &Path) -> Dashboard {
    let (src, store) = ReplaySource::open(path).unwrap();
    Dashboard::new(Box::new(src), store, Settings::default())
}

fn shipped() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings");
    let mut found = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "flr") {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

/// The checker itself finds what it is for: two labels drawn on one spot,
/// and a label wider than its panel.
#[test]
fn the_checker_sees_overprinted_and_cut_text() {
    let mut h = Harness::builder().with_size([300.0, 200.0]).build_ui(|ui| {
        let p = ui.painter();
        let font = egui::FontId::proportional(14.0);
        let c = egui::Color32::WHITE;
        p.text(
            egui::pos2(10.0, 10.0),
            egui::Align2::LEFT_TOP,
            "log.vram_reserved_mb",
            font.clone(),
            c,
        );
        p.text(
            egui::pos2(30.0, 12.0),
            egui::Align2::LEFT_TOP,
            "1234.5",
            font.clone(),
            c,
        );
        p.with_clip_rect(Rect::from_min_size(
            egui::pos2(10.0, 100.0),
            egui::vec2(40.0, 30.0),
        ))
        .text(
            egui::pos2(10.0, 100.0),
            egui::Align2::LEFT_TOP,
            "log.tokens_per_sec",
            font,
            c,
        );
    });
    h.run();
    let found = problems(&drawn(&h));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found.iter().any(|p| p.contains("overprint")), "{found:#?}");
    assert!(found.iter().any(|p| p.contains("is cut")), "{found:#?}");
}

#[test]
fn no_shipped_recording_draws_text_over_text() {
    let mut all = Vec::new();
    let recordings = shipped();
    // An empty list (recordings moved) would pass by checking nothing.
    assert!(
        recordings.len() >= 10,
        "{} shipped recordings",
        recordings.len()
    );
    for path in recordings {
        for size in SIZES {
            for p in check(replay(&path), size) {
                all.push(format!(
                    "{} at {}×{}: {p}",
                    path.file_name().unwrap().to_string_lossy(),
                    size[0],
                    size[1]
                ));
            }
        }
    }
    assert!(
        all.is_empty(),
        "{} problems:\n{}",
        all.len(),
        all.join("\n")
    );
}

#[test]
fn the_compare_view_draws_no_text_over_text() {
    let a = support::recording("watch-torch-flat-45s.flr");
    let b = support::recording("watch-torch-leak-45s.flr");
    let mut all = Vec::new();
    for size in SIZES {
        let mut d = replay(&a);
        let (other, store) = ReplaySource::open(&b).unwrap();
        d.compare_with(other.meta(), store, Align::Step);
        all.extend(check(d, size));
    }
    assert!(
        all.is_empty(),
        "{} problems:\n{}",
        all.len(),
        all.join("\n")
    );
}

/// A watched job as a real one prints it: long metric names, and markers
/// (`(t_s, text)`), over `seconds` at one sample every `every` seconds.
fn job(dir: &Path, name: &str, seconds: f64, every: f64, marks: &[(f64, String)]) -> PathBuf {
    use flatline_telemetry::recording::{Event, EventKind};
    use flatline_telemetry::{ChannelSpec, Group, Sample, Unit};
    let path = dir.join(name);
    let ch = |n: &str, u: Unit, g: Group| ChannelSpec::new(n, u, g);
    let mut w = support::watch_recording(
        &path,
        vec![
            ch("mem.rss", Unit::Bytes, Group::Memory),
            ch("log.step", Unit::Count, Group::StepLog),
            ch("log.loss", Unit::Number, Group::StepLog),
            ch("log.vram_reserved_mb", Unit::Mebibytes, Group::StepLog),
            ch("log.tokens_per_sec", Unit::PerSecond, Group::StepLog),
            ch("log.total_iter_ms", Unit::Milliseconds, Group::StepLog),
            ch(
                "log.reserved_but_unallocated_memory_of_the_caching_allocator_mb",
                Unit::Mebibytes,
                Group::StepLog,
            ),
        ],
    );
    let n = (seconds / every) as u64;
    for i in 0..=n {
        let t = i as f64 * every;
        let wobble = [0.0, 3.0, -2.0, 1.0][i as usize % 4];
        w.push_sample(&Sample::from_values(
            i,
            (t * 1e9) as u64,
            &[
                7e8 + wobble * 4096.0,
                i as f64 * 10.0,
                4.0 - t / seconds,
                2682.0 + wobble,
                108_500.0 + wobble * 100.0,
                151.0 + wobble,
                412.0 + wobble,
            ],
        ))
        .unwrap();
    }
    for (t, text) in marks {
        w.push_event(Event {
            t_ns: (t * 1e9) as u64,
            kind: EventKind::Marker(text.clone()),
        })
        .unwrap();
    }
    w.finish("completed").unwrap();
    path
}

/// Every text the dashboard of `path` draws at `size`.
fn texts_of(path: &Path, size: [f32; 2]) -> (Vec<String>, Vec<String>) {
    let mut h = Harness::builder()
        .with_size(size)
        .build_ui_state(frame, replay(path));
    for _ in 0..1000 {
        if h.state().store.unanalysed() == 0 {
            break;
        }
        h.run_steps(1);
    }
    assert_eq!(
        h.state().store.unanalysed(),
        0,
        "analyses still pending after 1000 frames"
    );
    h.run_steps(2);
    let d = drawn(&h);
    (d.iter().map(|t| t.text.clone()).collect(), problems(&d))
}

/// karpathy/nanoGPT's `train.py` watched for 90 s prints 23 markers (an
/// evaluation and a checkpoint every 40 iterations, and its start-up's end):
/// their labels go on the lane, once, none over another.
#[test]
fn a_training_job_s_markers_read_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut marks = vec![(4.0, "start-up ends".to_string())];
    for k in 0..11 {
        let t = 8.0 + k as f64 * 7.5;
        marks.push((t, "eval".into()));
        marks.push((t + 0.4, "checkpoint".into()));
    }
    assert_eq!(marks.len(), 23);
    let path = job(dir.path(), "nanogpt.flr", 90.0, 0.1, &marks);
    for size in SIZES {
        let (texts, problems) = texts_of(&path, size);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        // The lane names every marker once: no label left out, none said
        // again on each plot.
        let want = [("start-up ends", 1), ("eval", 11), ("checkpoint", 11)];
        assert_eq!(counted(&texts), want.into_iter().collect(), "{texts:?}");
    }
}

/// What the lane's labels add up to: each text with its count, from labels
/// such as "eval ×2 · checkpoint ×2".
fn counted(texts: &[String]) -> std::collections::BTreeMap<&str, usize> {
    let mut found = std::collections::BTreeMap::new();
    let named = texts.iter().filter(|t| {
        ["eval", "checkpoint", "start-up ends"]
            .iter()
            .any(|w| t.starts_with(w))
    });
    for t in named {
        for part in t.split(" · ") {
            let (text, n) = match part.split_once(" ×") {
                Some((text, n)) => (text, n.parse().unwrap()),
                None => (part, 1),
            };
            *found.entry(text).or_insert(0) += n;
        }
    }
    found
}

/// A day's run with 2,000 evaluations: the lane's labels count them all
/// (each names the glyphs up to the next), and nothing overprints.
#[test]
fn a_day_of_two_thousand_markers_reads_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let day = 86_400.0;
    let marks: Vec<(f64, String)> = (0..2000)
        .map(|k| (30.0 + k as f64 * (day - 60.0) / 2000.0, "eval".to_string()))
        .collect();
    let path = job(dir.path(), "day.flr", day, 10.0, &marks);
    for size in SIZES {
        let (texts, problems) = texts_of(&path, size);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert_eq!(
            counted(&texts),
            [("eval", 2000)].into_iter().collect(),
            "{texts:?}"
        );
    }
}
