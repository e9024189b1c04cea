//! One answer on every surface: for every shipped, corpus and golden
//! recording, the text receipt's first line, the Markdown receipt's
//! headline, the JSON `headline` and the window's banner are the same
//! sentence, figure for figure. They are laid out from one assessment; this proves no
//! surface adds, drops or rewords it.

mod support;

use std::path::{Path, PathBuf};

use egui_kittest::Harness;
use egui_kittest::kittest::{self, NodeT, Queryable};
use flatline_dashboard::ui::{Dashboard, ReplaySource, Settings};

fn frame(ui: &mut eframe::egui::Ui, d: &mut Dashboard) {
    d.tick();
    d.show(ui);
}

/// The window on a recording, every analysis landed.
fn window(path: &Path) -> Harness<'static, Dashboard> {
    let (src, store) = ReplaySource::open(path).unwrap();
    let dash = Dashboard::new(Box::new(src), store, Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    h.run_steps(1);
    for _ in 0..2000 {
        if h.state().store.unanalysed() == 0 {
            break;
        }
        h.run_steps(1);
    }
    assert_eq!(h.state().store.unanalysed(), 0, "{}", path.display());
    // The tree's findings are made once every channel is analysed.
    h.run_steps(2);
    h
}

fn recordings() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["", "corpus", "golden", "headlines"] {
        let d = support::recording(dir);
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "flr") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 40, "{} recordings", out.len());
    out
}

#[test]
fn every_surface_starts_with_the_same_sentence() {
    let (mut same, mut figures) = (0, Vec::new());
    for path in recordings() {
        let p = path.to_str().unwrap();
        let json = support::json(&support::flatline(&["report", p, "--format", "json"]));
        let headline = json["headline"].as_str().unwrap().to_owned();
        assert!(!headline.is_empty(), "{p}");
        let text = support::ok(&support::flatline(&["report", p]));
        assert_eq!(text.lines().next(), Some(headline.as_str()), "{p}: text");
        let md = support::ok(&support::flatline(&["report", p, "--format", "md"]));
        assert!(
            md.lines().any(|l| l == format!("**{headline}**")),
            "{p}: markdown has no line **{headline}**:\n{md}"
        );
        let h = window(&path);
        // The banner: a replay reads its whole recording as the receipt
        // does, so the sentence is the receipt's, figure for figure (a
        // banner the same but for a figure is counted, said and fails).
        let labels: Vec<String> = h
            .query_all(kittest::by().predicate(|_| true))
            .filter_map(|n| {
                let a = n.accesskit_node();
                a.value().or_else(|| a.label())
            })
            .collect();
        if labels.contains(&headline) {
            same += 1;
        } else {
            let want = shape(&headline);
            assert!(
                labels.iter().any(|l| shape(l) == want),
                "{p}: the window's banner does not say {headline:?}"
            );
            figures.push(p.to_owned());
        }
    }
    eprintln!(
        "the window's banner: the receipt's sentence in {same} recordings, the same but for its figures in {}: {figures:?}",
        figures.len()
    );
    assert!(
        figures.is_empty(),
        "banners that differ in a figure: {figures:?}"
    );
}

/// A sentence with its figures masked: `1021.7 KiB/s` and `1021.0 KiB/s`
/// read the same.
fn shape(s: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in s.chars() {
        if c.is_ascii_digit() || (in_number && (c == '.' || c == ',')) {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}
