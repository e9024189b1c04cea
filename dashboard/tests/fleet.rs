//! `flatline synth --fleet` and `flatline fleet`: one job's ranks, written
//! as their watchers would, and the one that is different found.

mod support;

use support::{flatline, ok};

/// 16 ranks of 15 minutes, rank 5 leaking: every format names rank 5 first
/// and alone; a rank's file cut short still counts (said truncated); a
/// damaged file is said, the others still compared, and the exit is 1.
#[test]
fn fleet_names_the_leaking_rank_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    ok(&flatline(&[
        "synth", "--fleet", "16", "--hours", "0.25", "--hz", "5", "--leak", "5", "--out", d,
    ]));
    let v: serde_json::Value =
        serde_json::from_slice(&flatline(&["fleet", d, "--format", "json"]).stdout).unwrap();
    let headline = v["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("rank 5 of 16 (node-0) grows") && headline.contains("tree.pss"),
        "{headline}"
    );
    let outliers = v["outliers"].as_array().unwrap();
    assert_eq!(outliers.len(), 1, "{outliers:?}");
    assert_eq!(outliers[0]["labels"]["rank"], "5");
    assert_eq!(outliers[0]["channel"], "tree.pss");
    assert_eq!(outliers[0]["per"], "step");
    assert_eq!(v["recordings"].as_array().unwrap().len(), 16);
    assert_eq!(v["recordings"][0]["labels"]["rank"], "0", "sorted by rank");
    let text = ok(&flatline(&["fleet", d]));
    assert!(text.starts_with("rank 5 of 16"), "{text}");
    let md = ok(&flatline(&["fleet", d, "--format", "md"]));
    assert!(md.contains("| rank 5 | node-0 | `tree.pss` |"), "{md}");

    // Cut one rank's file short, damage another: the first reads up to its
    // cut, the second is named; rank 5 is still the one.
    let cut = dir.path().join("rank-0002.flr");
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    std::fs::write(dir.path().join("rank-0009.flr"), b"not a recording").unwrap();
    let o = flatline(&["fleet", d, "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("1 of 16 recordings could not be read") && stderr.contains("rank-0009"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["headline"].as_str().unwrap().starts_with("rank 5 of 15"));
    let rows = v["recordings"].as_array().unwrap();
    let row = |f: &str| {
        rows.iter()
            .find(|r| r["file"].as_str().unwrap().ends_with(f))
            .unwrap()
    };
    assert_eq!(row("rank-0002.flr")["truncated"], true);
    assert!(row("rank-0009.flr")["error"].is_string());
}

/// A folder without recordings, and a file that is not there, are errors.
#[test]
fn fleet_refuses_what_is_not_a_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let o = flatline(&["fleet", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds no recordings"));
    let o = flatline(&["fleet"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The fleet's window: the headline on top, a row per rank with the
/// outlier's name in its colour, and a click on a rank opening its
/// recording (here into a list instead of a replay window).
#[test]
fn the_fleet_window_shows_the_outlier_and_opens_a_rank_on_click() {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use flatline_dashboard::ui::fleet::FleetView;
    use std::sync::Mutex;
    static OPENED: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());
    fn remember(p: &std::path::Path) -> anyhow::Result<()> {
        OPENED.lock().unwrap().push(p.to_owned());
        Ok(())
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    ok(&flatline(&[
        "synth", "--fleet", "8", "--hours", "0.2", "--hz", "5", "--leak", "3", "--out", d,
    ]));
    let files = flatline_cli::commands::fleet::files(&[dir.path().to_owned()]).unwrap();
    let fleet = flatline_cli::commands::fleet::read(&files, 16 << 20);
    let headline = fleet.headline.clone();
    assert!(headline.starts_with("rank 3 of 8"), "{headline}");
    let mut view = FleetView::new(fleet);
    view.opener = remember;
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(|ui, v: &mut FleetView| v.show(ui), view);
    h.run_steps(2);
    h.get_by_label(&headline);
    h.get_by_label_contains("tree.pss: 1 of 8 grow");
    h.get_by_label("rank 3").click();
    h.run_steps(2);
    let opened = OPENED.lock().unwrap().clone();
    assert_eq!(opened.len(), 1);
    assert!(opened[0].ends_with("rank-0003.flr"), "{opened:?}");
    assert!(h.state().opened.as_deref().unwrap().starts_with("opened "));
}

/// Recordings of every format version, without labels, of different
/// lengths: read, named by file, none called different.
#[test]
fn fleet_reads_every_format_version() {
    let golden = support::recording("golden");
    let v: serde_json::Value = serde_json::from_str(&ok(&flatline(&[
        "fleet",
        golden.to_str().unwrap(),
        "--format",
        "json",
    ])))
    .unwrap();
    let rows = v["recordings"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{v}");
    // v4 and v5 are watches of a job that lost a worker to the OOM killer:
    // the fleet says so first.
    let h = v["headline"].as_str().unwrap();
    assert!(
        h.starts_with("2 recordings ended out of memory, v4.flr first: Worker ")
            && h.contains("OOM killer"),
        "{h}"
    );
    assert!(
        rows.iter()
            .all(|r| r["error"].is_null() && r["labels"] == serde_json::json!({}))
    );
    assert_eq!(v["outliers"], serde_json::json!([]));
    assert!(v["digest"].as_str().is_some_and(|d| d.len() == 64));
}
