//! The real dashboard code, driven headless with egui_kittest: open a
//! recording, toggle a channel, scrub, switch to drift, press screenshot.

mod support;

use std::path::Path;

use eframe::egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use flatline_dashboard::ui::{Align, Dashboard, ReplaySource, Settings, Source};
use flatline_telemetry::recording::{Event, EventKind};
use support::golden_v1;

/// One frame as the window runs it: `App::logic` polls, then the ui draws.
fn frame(ui: &mut eframe::egui::Ui, d: &mut Dashboard) {
    d.tick();
    d.show(ui);
}

/// The channel list's checkbox (plot legends have checkboxes of the same name,
/// drawn after the side panel).
fn channel_box<'h>(h: &'h Harness<'static, Dashboard>, name: &'h str) -> egui_kittest::Node<'h> {
    h.get_all_by_role_and_label(Role::CheckBox, name)
        .next()
        .expect("a checkbox")
}

fn harness(path: &Path) -> Harness<'static, Dashboard> {
    let (src, store) = ReplaySource::open(path).unwrap();
    let dash = Dashboard::new(Box::new(src), store, Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    // The analyses are spread over frames (about 2 ms of them a frame, however
    // many that is on this machine): let them all land.
    h.run_steps(1);
    for _ in 0..500 {
        if h.state().store.unanalysed() == 0 {
            break;
        }
        h.run_steps(1);
    }
    assert_eq!(h.state().store.unanalysed(), 0);
    h.run_steps(1);
    h
}

#[test]
fn a_recording_opens_with_its_channels_plots_and_caption() {
    let h = harness(&golden_v1());
    assert_eq!(h.state().store.len(), 61);
    // Channel list, plot titles, timeline and the caption strip are all there.
    channel_box(&h, "mem.rss");
    // Memory channels a row each, in the unit each needs: the 156 KiB page
    // table is not drawn on the zero of a 41 MiB RSS.
    h.get_by_label("mem.rss (MiB)");
    h.get_by_label("mem.vm_pte (KiB)");
    // The finding first, above the plots.
    h.get_by_label("Memory is flat.");
    h.get_by_label("Play");
    h.get_by_label("sha256:5c54b06eac4f42418ee5f37394ebdfea1791e3660bf9411281b8e16f8b9afe09");
    h.get_by_label("file v1.flr");
    h.get_by_label("t 0.0–3.0 s");
}

#[test]
fn a_format_v2_recording_replays_like_v1() {
    let h = harness(&support::recording("golden/v2.flr"));
    assert_eq!(h.state().store.len(), 61);
    channel_box(&h, "mem.rss");
    h.get_by_label("mem.rss (MiB)");
    h.get_by_label("file v2.flr");
    // Paced ingest advances its steps: the step axis is offered.
    assert!(h.state().store.step_axis().is_some());
    h.get_by_label("x: step");
}

#[test]
fn toggling_a_channel_changes_what_is_plotted() {
    let mut h = harness(&golden_v1());
    assert!(!h.state().settings.selected.contains("mem.swap"));
    channel_box(&h, "mem.swap").click();
    h.run_steps(2);
    assert!(h.state().settings.selected.contains("mem.swap"));
    channel_box(&h, "mem.rss").click();
    h.run_steps(2);
    assert!(!h.state().settings.selected.contains("mem.rss"));
}

#[test]
fn the_timeline_scrubs_plays_and_jumps() {
    let mut h = harness(&golden_v1());
    let end = h.state().timeline.as_ref().unwrap().end_s;
    assert_eq!(
        h.state_mut().visible_len(),
        61,
        "opens on the whole recording"
    );
    h.get_by_label("Start").click();
    h.run_steps(2);
    let tl = h.state().timeline.as_ref().unwrap().clone();
    assert_eq!(tl.playhead_s, tl.start_s);
    assert_eq!(h.state_mut().visible_len(), 1);
    // Paused and analysed, the window needs no frame until something
    // happens; playing, it does.
    assert!(!h.state().busy(), "a paused replay asks for no frames");
    h.get_by_label("Play").click();
    h.run_steps(2);
    assert!(h.state().timeline.as_ref().unwrap().playing);
    assert!(h.state().busy(), "a playing replay asks for frames");
    h.get_by_label("End").click();
    h.run_steps(2);
    let tl = h.state().timeline.as_ref().unwrap().clone();
    assert!(!tl.playing);
    assert!(!h.state().busy());
    assert_eq!(tl.playhead_s, end);
}

#[test]
fn drift_mode_and_screenshot_are_one_click_away() {
    let mut h = harness(&golden_v1());
    assert!(!h.state().settings.drift);
    h.get_by_label("Drift").click();
    h.run_steps(2);
    assert!(h.state().settings.drift);
    // Drift in the unit the differences need.
    h.get_by_label("mem.rss drift (KiB)");
    // Grouped: the older view, a group and unit on one plot.
    h.get_by_label("Grouped").click();
    h.run_steps(2);
    h.get_by_label("Memory and page tables drift (KiB)");
    h.get_by_label("Grouped").click();
    h.run_steps(2);
    h.get_by_label("Screenshot").click();
    h.run_steps(1);
    assert_eq!(h.state().screenshots_requested, 1);
    assert!(h.state().capturing());
}

#[test]
fn the_recordings_browser_lists_and_opens_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(golden_v1(), dir.path().join("copy.flr")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a recording").unwrap();
    let mut h = harness(&golden_v1());
    h.state_mut().recordings_dir = dir.path().to_owned();
    h.get_by_label("Open recording…").click();
    h.run_steps(3);
    assert!(h.state().browser_open);
    let listed: Vec<String> = h
        .state()
        .listed
        .iter()
        .map(|l| l.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, ["copy.flr"]);
    // The folder is read when the browser opens or on Refresh, not every frame.
    std::fs::copy(golden_v1(), dir.path().join("later.flr")).unwrap();
    h.run_steps(2);
    assert_eq!(h.state().listed.len(), 1);
    h.get_by_label("Refresh").click();
    h.run_steps(3);
    assert_eq!(h.state().listed.len(), 2);
    h.get_by_label_contains("copy.flr").click();
    h.run_steps(2);
    assert!(!h.state().browser_open);
    assert!(h.state().source.meta().label.contains("copy.flr"));
    assert!(h.state().timeline.is_some(), "a replay gets a timeline");
}

/// Pictures of the main views. A missing or changed picture fails the test
/// and writes `*.new.png`; after looking at it, accept it with
/// `UPDATE_SNAPSHOTS=1 cargo test -p flatline --test ui`.
#[test]
fn snapshots_of_the_main_views() {
    let mut h = harness(&golden_v1());
    h.snapshot("replay_golden");
    h.get_by_label("Drift").click();
    h.run_steps(2);
    h.snapshot("replay_golden_drift");
}

/// A replay of each shipped recording, as a person first sees it.
fn snapshot_of(file: &str, name: &str, finding: &str) {
    let mut h = harness(&support::recording(file));
    h.get_by_label_contains(finding);
    h.snapshot(name);
}

#[test]
fn a_snapshot_of_the_sample_soak() {
    snapshot_of(
        "sample-soak-both-60s.flr",
        "replay_sample_soak",
        "Memory is flat.",
    );
}

#[test]
fn a_snapshot_of_the_seed_s_own_log() {
    snapshot_of(
        "seed-linux-10min.flr",
        "replay_seed_linux",
        "log.vm_rss_mb (and 1 more) cannot be told",
    );
}

#[test]
fn a_snapshot_of_the_allocating_loader() {
    snapshot_of(
        "ingest-baseline-60s.flr",
        "replay_ingest_baseline",
        "Memory is flat.",
    );
}

#[test]
fn a_snapshot_of_a_flat_watched_job() {
    snapshot_of(
        "watch-torch-flat-45s.flr",
        "replay_torch_flat",
        "No memory channel grows beyond its noise",
    );
}

/// The golden recordings of the later formats, drawn as v1 is: what each
/// version holds must reach the window, not only the reader's tests.
#[test]
fn a_snapshot_of_golden_v2() {
    snapshot_of("golden/v2.flr", "replay_golden_v2", "Memory is flat.");
}

#[test]
fn a_snapshot_of_golden_v3() {
    snapshot_of("golden/v3.flr", "replay_golden_v3", "Memory is flat.");
}

#[test]
fn a_snapshot_of_the_arena_loader() {
    snapshot_of(
        "ingest-arena-60s.flr",
        "replay_ingest_arena",
        "Memory is flat.",
    );
}

/// The banner says what the receipt says of a job whose workers copied
/// their parent's pages: it reads the tree up to where the analyses stop
/// (a DataLoader's workers exit with the job and give their memory back in
/// its last second; read to there, the banner said "cannot be told"), and
/// finds its start-up on the same channels as the receipt (it took a
/// worker's own USS too, and found 25.0 s where the receipt found 23.1 s).
#[test]
fn the_banner_tells_a_trees_copying_as_its_receipt_does() {
    let path = support::recording("watch-loader-list-burst-60s.flr");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["report", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let headline = receipt["headline"].as_str().unwrap();
    assert!(
        headline.starts_with(
            "Copy-on-access: worker 24601, worker 24602, worker 24603 and worker 24604 of main \
             24589 copy"
        ),
        "{headline}"
    );
    let h = harness(&path);
    h.get_by_label(headline);
}

/// A critical leak found in a watched PyTorch job: the banner says so in red.
#[test]
fn a_snapshot_of_a_leak_found_in_a_watched_job() {
    let mut h = harness(&support::recording("watch-torch-leak-45s.flr"));
    h.get_by_label_contains("python 11315 (main) grows");
    h.snapshot("replay_torch_leak");
}

/// A leak watched with `--sites`: one growth card (not one per channel of
/// the one process that grows), the line that holds it plotted beside its
/// process's memory, and a click on the card marks its process's row and
/// its site's.
#[test]
fn a_snapshot_of_a_leak_told_by_its_line() {
    let mut h = harness(&support::recording("watch-sites-torch.flr"));
    h.run_steps(2);
    h.get_by_label_contains("python 7830 (main) grows 1.65 MiB/s");
    // The card: who, then its line (the banner says the same in one label).
    h.get_by_label("python 7830 (main)");
    h.get_by_label_contains("% at sites_job.py:52 torch_job");
    assert_eq!(
        h.query_all_by_label("python 7830 (main)").count(),
        1,
        "one growth card"
    );
    let selected = &h.state().settings.selected;
    let site = h
        .state()
        .store
        .schema()
        .channels
        .iter()
        .find(|c| c.labels.get("line").map(String::as_str) == Some("52"))
        .map(|c| c.name.clone())
        .expect("the site of line 52");
    assert!(selected.contains(&site), "{site} plotted: {selected:?}");
    // Its site is the card's, not a card of its own (named by its
    // channel alone: its row and plot name it with more).
    assert_eq!(h.query_all_by_label(site.as_str()).count(), 0, "no card");
    h.get_by_label("python 7830 (main)").click();
    h.run_steps(2);
    let focus = h.state().focus.clone().expect("the card marks");
    assert_eq!(focus.pid, Some(7830));
    assert_eq!(focus.site.as_deref(), Some(site.as_str()));
    h.get_by_label("» 7830");
    h.snapshot("replay_sites_torch");
}

/// The flame graph of a `--sites` replay (live bytes by stack at the
/// playhead, the allocating lines on top): the leaking line is a frame, and
/// clicking a frame plots its sites.
#[test]
fn clicking_a_frame_of_the_flame_graph_plots_its_sites() {
    let mut h = harness(&support::recording("watch-sites-torch.flr"));
    h.run_steps(2);
    // At the end, what the sites held where the job's teardown began.
    h.get_by_label_contains(
        "Flame graph: live bytes by stack at 42.5 s, where the job's teardown began",
    );
    h.get_all_by_label("torch_job sites_job.py:52")
        .next()
        .expect("the leaking line's frame");
    let site = |line: &str| {
        h.state()
            .store
            .schema()
            .channels
            .iter()
            .find(|c| {
                c.name.ends_with(".live") && c.labels.get("line").map(String::as_str) == Some(line)
            })
            .map(|c| c.name.clone())
            .unwrap()
    };
    let compile = site("729");
    assert!(!h.state().settings.selected.contains(&compile));
    h.get_all_by_label("_compile_bytecode <frozen importlib._bootstrap_external>:729")
        .next()
        .expect("a frame of the import machinery")
        .click();
    h.run_steps(2);
    assert!(
        h.state().settings.selected.contains(&compile),
        "{compile} plotted after its frame's click"
    );
}

/// The leak on the step axis: the process tree's stacked areas run
/// unbroken under the rows (a step log's lines rarely fall on the tree's
/// readings; each reading is placed at the step reached by then), and every
/// plot spans the same steps.
#[test]
fn a_snapshot_of_a_leak_found_in_a_watched_job_by_step() {
    let mut h = harness(&support::recording("watch-torch-leak-45s.flr"));
    h.get_by_label("x: step").click();
    h.run_steps(2);
    h.get_by_label("Process tree: PSS of each process, stacked, each at its last reading (MiB)");
    h.snapshot("replay_torch_leak_steps");
}

/// The keys people expect of a viewer: space, arrows, f, d, s, ?.
#[test]
fn the_keys_people_expect_work() {
    use eframe::egui::Key;
    let mut h = harness(&golden_v1());
    h.key_press(Key::D);
    h.run_steps(2);
    assert!(h.state().settings.drift, "d: drift");
    h.key_press(Key::D);
    h.run_steps(1);
    assert!(!h.state().settings.drift);
    // Space plays from the start (the playhead sits at the end), then pauses.
    h.key_press(Key::Space);
    h.run_steps(1);
    assert!(h.state().timeline.as_ref().unwrap().playing, "space: play");
    h.key_press(Key::Space);
    h.run_steps(1);
    assert!(
        !h.state().timeline.as_ref().unwrap().playing,
        "space: pause"
    );
    // → goes to the next event (a marker, a phase), not to every step.
    for (t, text) in [(1.0, "eval"), (2.0, "checkpoint")] {
        h.state_mut().store.push_event(Event {
            t_ns: (t * 1e9) as u64,
            kind: EventKind::Marker(text.into()),
        });
    }
    h.state_mut().timeline.as_mut().unwrap().seek(0.5);
    let playhead =
        |h: &Harness<'static, Dashboard>| h.state().timeline.as_ref().unwrap().playhead_s;
    for (key, to) in [
        (Key::ArrowRight, 1.0),
        (Key::ArrowRight, 2.0),
        (Key::ArrowLeft, 1.0),
    ] {
        h.key_press(key);
        h.run_steps(1);
        assert_eq!(playhead(&h), to, "{key:?}");
    }
    // ? lists the keys; Esc closes the list.
    h.key_press(Key::Questionmark);
    h.run_steps(2);
    h.get_by_label("fit: every plot back to all of its data");
    h.key_press(Key::Escape);
    h.run_steps(2);
    assert!(
        h.query_by_label("fit: every plot back to all of its data")
            .is_none()
    );
    // t: the time on the local wall clock, named by its zone, in the
    // read-out too; t again: back.
    let started_s = h.state().source.meta().started_unix_ms.unwrap() / 1000;
    let zone = flatline_arena::sys::local_zone(started_s as i64)
        .map(|(_, z)| z)
        .filter(|z| !z.is_empty())
        .unwrap_or_else(|| "UTC".to_string());
    let on_wall = format!(" {zone}  ·  step");
    let y = h.get_by_label("mem.rss (MiB)").rect().bottom() + 30.0;
    for (wall, expect) in [(true, on_wall.as_str()), (false, " s  ·  step")] {
        h.key_press(Key::T);
        h.run_steps(1);
        assert_eq!(h.state().settings.wall_clock, wall);
        h.hover_at(eframe::egui::pos2(800.0, y));
        h.run_steps(2);
        h.get(egui_kittest::kittest::By::new().label_contains(expect));
    }
    h.key_press(Key::S);
    h.run_steps(1);
    assert_eq!(h.state().screenshots_requested, 1, "s: screenshot");
}

/// Shift + drag across a plot chooses a part of the run; its receipt opens
/// and agrees with `report --from/--to` on the same part of the file.
#[test]
fn shift_dragging_a_plot_gives_the_receipt_of_that_part() {
    use eframe::egui::{Event, Modifiers, pos2};
    let mut h = harness(&golden_v1());
    let title = h.get_by_label("mem.rss (MiB)").rect();
    let y = title.bottom() + 30.0;
    h.event(Event::ModifiersChanged(Modifiers::SHIFT));
    h.hover_at(pos2(700.0, y));
    h.run_steps(1);
    h.drag_at(pos2(700.0, y));
    h.run_steps(1);
    for x in [800.0, 900.0, 1100.0] {
        h.hover_at(pos2(x, y));
        h.run_steps(1);
    }
    h.drop_at(pos2(1100.0, y));
    h.run_steps(2);
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    h.run_steps(1);
    let r = h.state().part.clone().expect("a receipt for the part");
    assert!(
        r.from < r.to && r.from > 0.0 && r.to < 3.1,
        "{} to {}",
        r.from,
        r.to
    );
    h.get_by_label_contains("Receipt: ");
    h.get_by_label("Copy as Markdown");
    // The same part through the command line's analysis of the file.
    let rec = flatline_cli::commands::report::open(&golden_v1()).unwrap();
    let t0 = rec.t_ns[0] as f64 / 1e9;
    let cli = flatline_receipt::report::analyse_range(&rec, None, Some([r.from - t0, r.to - t0]));
    let rss = cli
        .rows
        .iter()
        .find(|row| row.spec.name == "mem.rss")
        .unwrap();
    let ours = r.rows.iter().find(|row| row.channel == "mem.rss").unwrap();
    assert_eq!(
        ours.verdict,
        flatline_receipt::report::verdict_text(&rss.analysis, rss.spec.unit)
    );
    assert!(r.markdown.contains("| `mem.rss` |"), "{}", r.markdown);
    h.snapshot("replay_golden_receipt");
}

/// A verdict card is one line until clicked, then shows its details; a
/// second click folds it again.
#[test]
fn a_folded_verdict_card_opens_on_click() {
    let mut h = harness(&golden_v1());
    let details = "4 jumps × 4.0 KiB, longest flat 1.0 s";
    assert!(h.query_by_label(details).is_none(), "folded at first");
    // The card's line: the right-most "mem.rss" label (the other is the list's).
    let at = h
        .get_all_by_label("mem.rss")
        .map(|n| n.rect().center())
        .max_by(|a, b| a.x.total_cmp(&b.x))
        .unwrap()
        + eframe::egui::vec2(60.0, 0.0);
    for open in [true, false] {
        h.hover_at(at);
        h.run_steps(1);
        h.drag_at(at);
        h.run_steps(1);
        h.drop_at(at);
        h.run_steps(2);
        assert_eq!(h.query_by_label(details).is_some(), open);
    }
}

/// Hovering a plot reads out its channels at that time, and a jump there
/// with its size; the jump is drawn, not listed in a legend.
#[test]
fn hovering_a_plot_reads_out_the_time_its_values_and_a_jump() {
    use egui_kittest::kittest::By;
    let mut h = harness(&golden_v1());
    assert!(
        h.query_by_label("mem.rss jumps").is_none(),
        "not in a legend"
    );
    let title = h.get_by_label("mem.rss (MiB)").rect();
    let y = title.bottom() + 30.0;
    // Over the middle of the plot: the time and each channel's value.
    h.hover_at(eframe::egui::pos2(800.0, y));
    h.run_steps(2);
    h.get(By::new().label_contains("mem.rss  41."));
    // Sweep across it: near one of mem.rss's jumps the read-out names it.
    let mut found = false;
    for x in (400..1400).step_by(6) {
        h.hover_at(eframe::egui::pos2(x as f32, y));
        h.run_steps(1);
        if h.query(By::new().label_contains("jump in mem.rss: +4.0 KiB at"))
            .is_some()
        {
            found = true;
            break;
        }
    }
    assert!(found, "no jump read out along the mem.rss plot");
    h.run_steps(1);
    h.snapshot("replay_golden_hover");
}

/// With steps as the x axis, a jump is read out there too, with its own
/// time and step: the same words as on the time axis, whatever the pointer's
/// own step.
#[test]
fn on_the_step_axis_a_jump_is_read_out_with_its_own_step() {
    use egui_kittest::kittest::{By, NodeT};
    fn jumps_along(h: &mut Harness<'_, Dashboard>) -> Vec<String> {
        let y = h.get_by_label("mem.rss (MiB)").rect().bottom() + 30.0;
        let mut seen = Vec::new();
        for x in (400..1400).step_by(4) {
            h.hover_at(eframe::egui::pos2(x as f32, y));
            h.run_steps(1);
            const JUMP: &str = "jump in mem.rss: +4.0 KiB at";
            // The read-out's line that names the jump.
            // A label keeps its text as its AccessKit value.
            let found = h
                .query(By::new().label_contains(JUMP))
                .and_then(|n| n.accesskit_node().value())
                .and_then(|l| {
                    l.lines()
                        .find(|line| line.contains(JUMP))
                        .map(str::to_owned)
                });
            if let Some(text) = found.filter(|t| !seen.contains(t)) {
                seen.push(text);
            }
        }
        seen
    }
    let mut h = harness(&golden_v1());
    let on_time = jumps_along(&mut h);
    assert!(
        !on_time.is_empty() && on_time.iter().all(|t| t.contains("(step ")),
        "jumps on the time axis: {on_time:?}"
    );
    h.get_by_label("x: step").click();
    h.run_steps(2);
    let on_steps = jumps_along(&mut h);
    assert!(!on_steps.is_empty(), "no jump read out on the step axis");
    for t in &on_steps {
        assert!(on_time.contains(t), "{t:?} is not among {on_time:?}");
    }
    h.run_steps(1);
    h.snapshot("replay_golden_step_axis_jump");
}

#[test]
fn live_data_streams_in_and_recording_switches_on_and_off() {
    use flatline_arena::workload::driver::Workload;
    use flatline_dashboard::ui::{LiveSource, ServeConfig, Source};
    let flatline = std::path::Path::new(env!("CARGO_BIN_EXE_flatline"));
    let (mut src, store) =
        LiveSource::start_with(flatline, ServeConfig::new(Workload::Ops1b, 50.0)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.flr");
    src.start_recording(&path).unwrap();
    let dash = Dashboard::new(Box::new(src), store, Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    // 0.3 s unloaded; waiting for the samples rather than a fixed time keeps a
    // loaded machine from failing the test.
    let t0 = std::time::Instant::now();
    while h.state().store.len() < 15 && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(60));
        h.run_steps(1);
    }
    let n = h.state().store.len();
    assert!(n >= 15, "{n} samples after {:?} at 50 Hz", t0.elapsed());
    let store = &h.state().store;
    let rss = store.schema().index_of("mem.rss").unwrap();
    assert!(
        store.limit(rss).is_some_and(|(limit, _)| limit > 1e8),
        "the cgroup's limit or the host's RAM bounds the live RSS: {:?}",
        store.limit(rss)
    );
    // ops1b has no steps: its work.steps stays 0, so no step axis is offered.
    assert_eq!(store.step_axis(), None);
    assert!(h.query_by_label("x: step").is_none());
    h.get_by_label_contains("REC live.flr");
    // A marker typed into the window is recorded by the workload process.
    let field = h.get_by_role(Role::TextInput);
    field.focus();
    field.type_text("lr to 3e-4");
    h.run_steps(2);
    h.get_by_label("Mark").click();
    h.run_steps(1);
    let marked = support::wait_for(std::time::Duration::from_millis(60), || {
        h.run_steps(1);
        h.state()
            .store
            .events()
            .iter()
            .any(|e| {
                e.kind == flatline_telemetry::recording::EventKind::Marker("lr to 3e-4".into())
            })
            .then_some(())
    });
    assert!(marked.is_some(), "the marker came back in the stream");
    assert!(h.state().view.mark_text.is_empty(), "the field is cleared");
    h.get_by_label("Stop workload").click();
    h.run_steps(1);
    assert_eq!(h.state().source.workload_running(), Some(false));
    h.get_by_label("Stop recording").click();
    h.run_steps(1);
    assert!(h.state().source.recording().is_none());
    let rec = flatline_telemetry::recording::Recording::open(&path).unwrap();
    assert!(rec.tail.is_none(), "a finished recording: {:?}", rec.tail);
    assert!(rec.len() >= 15 && rec.channel("work.ops").is_some());
    assert!(
        rec.events.iter().any(
            |e| e.kind == flatline_telemetry::recording::EventKind::Marker("lr to 3e-4".into())
        )
    );
    // The header comes from the same setup as a soak's: the workload and the rate.
    let config: Vec<(&str, &str)> = rec
        .header
        .config
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        config,
        [("hz", "50"), ("layout", "aos"), ("workload", "ops1b")]
    );
    assert_eq!(rec.header.source, "live");
    if let Ok(out) = std::env::var("FLATLINE_SAVE_LIVE_PNG") {
        // For a person to look at: FLATLINE_SAVE_LIVE_PNG=/tmp/live.png cargo test …
        h.render().unwrap().save(out).unwrap();
    }
}

#[test]
fn follow_shows_a_recording_while_a_soak_writes_it() {
    use flatline_dashboard::ui::Source;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("growing.flr");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args([
            "soak",
            "--seconds",
            "3",
            "--workload",
            "idle",
            "--hz",
            "50",
            "--out",
            path.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let (mut src, mut store) = loop {
        match ReplaySource::follow(&path) {
            Ok(opened) => break opened,
            Err(_) if t0.elapsed().as_secs() < 10 => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Err(e) => panic!("{e:#}"),
        }
    };
    assert!(src.status().starts_with("following"));
    // The first 20 samples (0.4 s of a 3 s soak), polled as the dashboard does.
    while store.len() < 20 && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        src.poll(&mut store);
    }
    let mid = store.len();
    assert!(mid >= 20, "{mid} samples after {:?} at 50 Hz", t0.elapsed());
    assert!(child.wait().unwrap().success());
    src.poll(&mut store);
    assert_eq!(src.status(), "ended: completed");
    let whole = flatline_telemetry::recording::Recording::open(&path).unwrap();
    assert_eq!(store.len(), whole.len());
    assert!(store.len() > mid);
    assert_eq!(src.meta().digest.as_deref(), Some(whole.digest.as_str()));
}

/// A file followed from before its first samples were whole: the
/// timeline grows with what arrives, never stuck at 0–0 s.
#[test]
fn a_followed_recording_opened_empty_grows_its_timeline() {
    use flatline_telemetry::{ChannelSpec, Group, Sample, Unit};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.flr");
    let mut w = support::watch_recording(
        &path,
        vec![ChannelSpec::new("mem.rss", Unit::Bytes, Group::Memory)],
    );
    w.flush().unwrap();
    let (src, store) = ReplaySource::follow(&path).unwrap();
    assert_eq!(store.len(), 0, "nothing whole yet");
    let mut d = Dashboard::new(Box::new(src), store, Settings::default());
    d.tick();
    // A block is written whole once it holds BLOCK_SAMPLES samples.
    let n = flatline_telemetry::recording::BLOCK_SAMPLES as u64;
    for i in 0..n + 10 {
        let s = Sample::from_values(i, 500_000_000 + i * 100_000_000, &[1e6]);
        w.push_sample(&s).unwrap();
    }
    w.flush().unwrap();
    let t0 = std::time::Instant::now();
    while (d.store.len() as u64) < n && t0.elapsed() < support::PATIENCE {
        d.tick();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(d.store.len() as u64, n);
    let tl = d.timeline.as_ref().unwrap();
    let end = 0.5 + (n - 1) as f64 * 0.1;
    assert!(
        (tl.start_s - 0.5).abs() < 1e-9
            && (tl.end_s - end).abs() < 1e-9
            && tl.playhead_s == tl.end_s,
        "{tl:?}"
    );
}

#[test]
fn a_followed_recording_takes_channels_that_join_and_end() {
    use flatline_dashboard::ui::Source;
    use flatline_telemetry::{ChannelSpec, Group, Sample, Unit};
    let spec = |n: &str| ChannelSpec::new(n, Unit::Bytes, Group::Memory);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.flr");
    let mut w = support::watch_recording(&path, vec![spec("mem.rss")]);
    let at = |i: u64, v: &[f64]| Sample::from_values(i, i * 100_000_000, v);
    for i in 0..3 {
        w.push_sample(&at(i, &[1e6])).unwrap();
    }
    w.flush().unwrap();
    let (mut src, mut store) = ReplaySource::follow(&path).unwrap();
    assert_eq!(
        (store.len(), store.schema().len()),
        (0, 1),
        "nothing whole yet"
    );
    // A worker appears, lives two samples, exits.
    w.add_channels(&[spec("pid9.rss")]).unwrap();
    for i in 3..5 {
        w.push_sample(&at(i, &[1e6, 5e5])).unwrap();
    }
    w.end_channels(&[1]).unwrap();
    w.push_sample(&at(5, &[1e6, 7.0])).unwrap();
    // A second worker takes the first one's sample slot.
    w.add_channels(&[spec("pid10.rss")]).unwrap();
    w.push_sample(&at(6, &[1e6, 6e5])).unwrap();
    w.finish("completed").unwrap();
    src.poll(&mut store);
    assert_eq!(store.schema().len(), 3);
    let worker = store.series(1).values();
    assert_eq!(worker.len(), 7);
    assert!(
        worker[..3].iter().all(|v| v.is_nan()),
        "absent before it joined"
    );
    assert_eq!(&worker[3..5], &[5e5, 5e5]);
    assert!(
        worker[5..].iter().all(|v| v.is_nan()),
        "ended: its slot is not read"
    );
    let second = store.series(2).values();
    assert!(second[..6].iter().all(|v| v.is_nan()));
    assert_eq!(
        second[6], 6e5,
        "the reused slot's value goes to the new channel"
    );
    assert!(!store.is_live(1) && store.is_live(2));
    assert_eq!(src.status(), "ended: completed");
}

/// The live window runs its workload in a child process: what it plots as
/// the workload's memory must not grow with what the window itself keeps.
#[test]
fn the_live_source_measures_the_workload_not_the_viewer() {
    use flatline_arena::workload::driver::Workload;
    use flatline_dashboard::ui::{LiveSource, ServeConfig, Source};
    let flatline = std::path::Path::new(env!("CARGO_BIN_EXE_flatline"));
    let (mut src, mut store) =
        LiveSource::start_with(flatline, ServeConfig::new(Workload::Idle, 1000.0)).unwrap();
    assert_ne!(src.pid(), std::process::id());
    let rss = store.schema().index_of("mem.rss").unwrap();
    let mut poll_until = |n: usize| {
        support::wait_for(std::time::Duration::from_millis(20), || {
            src.poll(&mut store);
            (store.len() >= n).then_some(())
        })
        .unwrap_or_else(|| panic!("fewer than {n} samples"));
        let rss_now = flatline_analysis::rules::latest(store.series(rss).values());
        (rss_now.unwrap(), store.heap_bytes())
    };
    // After a start-up of two seconds at 1 kHz, ten more seconds.
    let (rss_early, held_early) = poll_until(2_000);
    let (rss_late, held_late) = poll_until(12_000);
    // The viewer kept megabytes more (its columns and pyramids); the measured
    // process, which sends them, held its memory within a few pages.
    assert!(
        held_late - held_early > 2 << 20,
        "the store grew by {} bytes",
        held_late - held_early
    );
    let grew = rss_late - rss_early;
    assert!(
        grew.abs() <= 64.0 * 4096.0,
        "the workload process's RSS moved {grew} bytes while the viewer took 10,000 samples"
    );
    assert_eq!(src.status(), "running");
}

/// A watched tree in the window: processes join the store mid-stream through
/// the sampler's schema feed, the processes panel lists them, a click plots
/// one, and tree.pss has its stacked plot.
#[test]
fn a_watched_tree_fills_the_processes_panel() {
    use flatline_dashboard::ui::{WatchSource, process_rows};
    use flatline_telemetry::recording::{RecordingSetup, event_channel};
    use flatline_telemetry::{SamplerConfig, Target};
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cow_workers.py");
    let mut child = std::process::Command::new("python3")
        .arg(&fixture)
        .args(["list", "16", "10", "0.3"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let events = event_channel();
    let cfg = SamplerConfig {
        hz: 20.0,
        target: Target::Pid(child.id()),
        tree: true,
        gpu: false,
        events: Some(events.0.clone()),
        ..SamplerConfig::default()
    };
    let (src, store) = WatchSource::start(
        child.id(),
        cfg,
        Vec::new(),
        events,
        RecordingSetup::new("watch"),
        None,
        false,
        flatline_cli::cli::OnWriteError::KeepSampling,
        None,
    )
    .unwrap();
    let fixed = store.schema().len();
    let dash = Dashboard::new(Box::new(src), store, Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    let t0 = std::time::Instant::now();
    while t0.elapsed().as_secs() < 20 {
        let d = h.state_mut();
        // Every process is a row from its start event on; wait for all
        // three to have their channels and a PSS reading.
        let n = d.store.len();
        let rows = process_rows(&d.frame(), n);
        if rows.iter().filter(|r| r.pss.is_some()).count() >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        h.run_steps(1);
    }
    h.run_steps(1);
    let d = h.state_mut();
    let n = d.store.len();
    let rows = process_rows(&d.frame(), n);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(
        d.store.schema().len(),
        fixed + 3 * flatline_telemetry::tree::PROCESS_CHANNELS.len(),
        "each process's channels joined"
    );
    let worker = rows.iter().find(|r| r.role == "worker").unwrap().clone();
    assert!(worker.pss.is_some_and(|v| v > 1e6), "{worker:?}");
    h.get_by_label("Process tree: PSS of each process, stacked, each at its last reading (MiB)");
    h.get_by_label_contains("Processes (3 live");
    h.get_by_label(&worker.pid.to_string()).click();
    h.run_steps(2);
    assert!(
        h.state()
            .settings
            .selected
            .contains(&format!("{}.pss", worker.stem))
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A node's tree of 65 processes (a launcher, 4 ranks of 15 workers) where
/// one worker copies its rank's pages: 18 have channels of their own, the
/// rest only start events. The panel lists every live process, counts them
/// all, shows the copier under its rank, folds each rank's flat workers into
/// one line, and unfolds them on a click.
#[test]
fn a_node_sized_tree_folds_its_flat_workers_and_shows_the_one_that_grows() {
    use flatline_dashboard::ui::process_rows;
    use flatline_telemetry::tree::PROCESS_CHANNELS;
    use flatline_telemetry::{ChannelSpec, Group, Kind, Sample, Unit};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.flr");
    // (pid, ppid, role, channels of its own)
    let mut procs = vec![(1000u32, 1u32, "main", true)];
    for r in 0..4u32 {
        let rank = 2000 + 1000 * r;
        procs.push((rank, 1000, "rank", true));
        procs.extend((1..=15).map(|w| (rank + w, rank, "worker", w <= 3)));
    }
    let copier = 4007;
    procs.iter_mut().find(|p| p.0 == copier).unwrap().3 = true;
    let mut channels = vec![
        ChannelSpec::new("tree.pss", Unit::Bytes, Group::Memory).with_kind(Kind::Level),
        ChannelSpec::new("tree.procs", Unit::Count, Group::Memory).with_kind(Kind::Gauge),
    ];
    let own: Vec<u32> = procs.iter().filter(|p| p.3).map(|p| p.0).collect();
    for &(pid, ppid, role, chans) in &procs {
        if chans {
            channels.extend(PROCESS_CHANNELS.iter().map(|&leaf| {
                flatline_telemetry::catalog::spec(&format!("pid{pid}.{leaf}"))
                    .with_label("pid", pid.to_string())
                    .with_label("ppid", ppid.to_string())
                    .with_label("name", "python3")
                    .with_label("role", role)
            }));
        }
    }
    let mut w = support::watch_recording(&path, channels);
    for &(pid, ppid, role, _) in &procs {
        w.push_event(Event {
            t_ns: 0,
            kind: EventKind::ProcessStarted {
                pid,
                ppid,
                name: "python3".into(),
                role: role.into(),
            },
        })
        .unwrap();
    }
    const MB: f64 = 1e6;
    for i in 0..600u64 {
        let t = i as f64 / 10.0;
        // The copier's own memory grows 1 MB/s from 20 s; the rest hold.
        let copied = (t - 20.0).max(0.0) * MB;
        let mut v = vec![0.0, procs.len() as f64];
        for &pid in &own {
            let (pss, uss) = if pid == copier {
                (60.0 * MB + copied, 10.0 * MB + copied)
            } else {
                (60.0 * MB, 10.0 * MB)
            };
            v[0] += pss;
            v.extend([
                200.0 * MB,
                pss,
                uss,
                if pid == copier { copied } else { 0.0 },
            ]);
        }
        w.push_sample(&Sample::from_values(i, i * 100_000_000, &v))
            .unwrap();
    }
    w.finish("completed").unwrap();
    let (src, store) = ReplaySource::open(&path).unwrap();
    let d = Dashboard::new(Box::new(src), store, Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, d);
    // Every channel analysed (a frame analyses within a budget).
    h.state_mut().store.begin_frame(None);
    h.run_steps(2);
    let d = h.state_mut();
    let n = d.store.len();
    let rows = process_rows(&d.frame(), n);
    assert_eq!(rows.len(), 65, "every live process is a row");
    let grew: Vec<u32> = rows.iter().filter(|r| r.grew).map(|r| r.pid).collect();
    assert_eq!(grew, [copier], "only the copier grew");
    h.get_by_label_contains("Processes (65 live, 18 with channels of their own");
    h.get_by_label(&format!("  {copier}"));
    assert!(
        h.query_by_label("  4010").is_none(),
        "flat workers are folded"
    );
    assert_eq!(
        h.query_all_by_label("+ 15").count(),
        3,
        "three ranks fold 15"
    );
    h.get_by_label("+ 14").click();
    h.run_steps(2);
    h.get_by_label("– 14");
    h.get_by_label("  4010");
}

/// A job's markers (evals, checkpoints) are drawn where they happened: at
/// their time, or at their step when steps are the x axis.
#[test]
fn markers_are_placed_at_their_time_or_step() {
    use flatline_dashboard::ui::marker_lines;
    use flatline_telemetry::recording::{Event, EventKind};
    use flatline_telemetry::{ChannelSpec, Group, Sample, Unit};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("marks.flr");
    let mut w = support::watch_recording(
        &path,
        vec![ChannelSpec::new("log.step", Unit::Count, Group::StepLog)],
    );
    for i in 0..10u64 {
        w.push_sample(&Sample::from_values(i, i * 100_000_000, &[10.0 * i as f64]))
            .unwrap();
    }
    let mark = |t_ns: u64, text: &str| Event {
        t_ns,
        kind: EventKind::Marker(text.into()),
    };
    w.push_event(mark(300_000_000, "eval")).unwrap();
    w.push_event(mark(2_000_000_000, "after the end")).unwrap();
    // A probe's note (a GPU lost) is a moment on the plots too.
    let lost = "gpu1 stopped answering: NVML: GPU is lost";
    w.push_event(Event {
        t_ns: 500_000_000,
        kind: EventKind::Note(lost.into()),
    })
    .unwrap();
    w.finish("completed").unwrap();
    let (src, store) = ReplaySource::open(&path).unwrap();
    let d = Dashboard::new(Box::new(src), store, Settings::default());
    let n = d.store.len();
    let f = d.frame();
    assert_eq!(
        marker_lines(&f, n, false),
        [(0.3, "eval".to_string()), (0.5, lost.to_string())]
    );
    assert_eq!(
        marker_lines(&f, n, true),
        [(30.0, "eval".to_string()), (50.0, lost.to_string())]
    );
    assert!(
        marker_lines(&f, 3, false).is_empty(),
        "not yet reached at 0.2 s"
    );
    // "Next event" stops at markers, not at every step; the timeline lists them.
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, d);
    h.get_by_label("Start").click();
    h.run_steps(2);
    h.get_by_label("Next event").click();
    h.run_steps(2);
    assert_eq!(h.state().timeline.as_ref().unwrap().playhead_s, 0.3);
    h.get_by_label("go to marker").click();
    h.run_steps(2);
    h.get_by_label("0.3 s  eval");
    h.get_by_label(&format!("0.5 s  {lost}"));
    h.get_by_label("2.0 s  after the end").click();
    h.run_steps(2);
    let tl = h.state().timeline.as_ref().unwrap();
    assert_eq!(
        tl.playhead_s, tl.end_s,
        "the playhead goes no further than the end"
    );
}

/// Counters are plotted as rates: the rise of each column over its width.
#[test]
fn counters_plot_as_rates() {
    use egui_plot::PlotPoint;
    use flatline_dashboard::ui::rates;
    let p = |x, y| PlotPoint::new(x, y);
    // Columns of min and max points: 10/s, then a restart, then 20/s.
    let pts = [
        p(0.0, 0.0),
        p(1.0, 5.0),
        p(1.0, 10.0),
        p(2.0, 20.0),
        p(3.0, 1.0),
        p(4.0, 21.0),
    ];
    let r = rates(&pts);
    let got: Vec<(f64, f64)> = r.iter().map(|p| (p.x, p.y)).collect();
    assert_eq!(got, [(1.0, 10.0), (2.0, 10.0), (4.0, 20.0)]);
}

/// A run of one value is drawn as its two ends, and the line means the same:
/// the same rates where something rose, zero between.
#[test]
fn a_flat_run_is_drawn_as_its_ends() {
    use egui_plot::PlotPoint;
    use flatline_dashboard::ui::{push_column, rates};
    // A counter's columns (x, lo, hi): flat, a min/max column, flat, a
    // rise, flat again.
    let cols = [
        (0.0, 5.0, 5.0),
        (1.0, 5.0, 5.0),
        (2.0, 5.0, 5.0),
        (3.0, 5.0, 5.0),
        (4.0, 5.0, 9.0),
        (5.0, 9.0, 9.0),
        (6.0, 9.0, 9.0),
        (7.0, 12.0, 12.0),
        (8.0, 12.0, 12.0),
        (9.0, 12.0, 12.0),
    ];
    let mut all = Vec::new();
    let mut line = Vec::new();
    for &(x, lo, hi) in &cols {
        all.push(PlotPoint::new(x, lo));
        if hi != lo {
            all.push(PlotPoint::new(x, hi));
        }
        push_column(&mut line, x, lo, hi);
    }
    let got: Vec<(f64, f64)> = line.iter().map(|p| (p.x, p.y)).collect();
    assert_eq!(
        got,
        [
            (0.0, 5.0),
            (3.0, 5.0),
            (4.0, 5.0),
            (4.0, 9.0),
            (6.0, 9.0),
            (7.0, 12.0),
            (9.0, 12.0)
        ]
    );
    let nonzero = |pts: &[PlotPoint]| -> Vec<(f64, f64)> {
        rates(pts)
            .iter()
            .filter(|r| r.y != 0.0)
            .map(|r| (r.x, r.y))
            .collect()
    };
    assert_eq!(nonzero(&line), nonzero(&all));
    assert_eq!(nonzero(&line), [(4.0, 4.0), (7.0, 3.0)]);
}

/// A dashboard comparing two shipped recordings, A as the source and B
/// beside it, with every analysis of both landed.
fn compare_harness(a: &Path, b: &Path) -> Harness<'static, Dashboard> {
    let (src, store) = ReplaySource::open(a).unwrap();
    let (other, other_store) = ReplaySource::open(b).unwrap();
    let mut dash = Dashboard::new(Box::new(src), store, Settings::default());
    dash.compare_with(other.meta(), other_store, Align::Step);
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    let pending =
        |d: &Dashboard| d.store.unanalysed() + d.other.as_ref().map_or(0, |o| o.store.unanalysed());
    for _ in 0..1000 {
        h.run_steps(1);
        if pending(h.state()) == 0 {
            break;
        }
    }
    assert_eq!(pending(h.state()), 0);
    h.run_steps(1);
    h
}

#[test]
fn compare_mode_draws_both_sides_and_scrubs_both() {
    let (a, b) = (
        support::recording("ingest-arena-60s.flr"),
        support::recording("ingest-baseline-60s.flr"),
    );
    let mut h = compare_harness(&a, &b);
    let other = h.state().other.as_ref().unwrap();
    assert_eq!(other.align, Align::Step, "both soaks have steps");
    let b_len = other.store.len();
    let b_digest = other.meta.digest.clone().unwrap();
    // One plot a channel, both verdicts on each card, both files in the caption.
    h.get_by_label("alloc.rate (/s)");
    h.get_by_label("mem.rss (MiB)");
    h.get_by_label("Verdicts, A and B");
    h.get_by_label("B: Memory is flat.");
    h.get_by_label(&format!("B ingest-baseline-60s.flr sha256:{b_digest}"));
    assert_eq!(h.state_mut().other_visible_len(), b_len);
    // The playhead moves both sides.
    let mid = {
        let tl = h.state_mut().timeline.as_mut().unwrap();
        tl.seek((tl.start_s + tl.end_s) / 2.0);
        tl.playhead_s
    };
    h.run_steps(2);
    let seen = h.state_mut().other_visible_len();
    assert!(seen > 0 && seen < b_len, "{seen} of {b_len} at {mid} s");
    let o = &h.state().other.as_ref().unwrap().store;
    assert!(o.times()[seen - 1] <= mid && o.times()[seen] > mid);
    // "Next event" and the marker list take either side's moments: a
    // marker B had at 30 s is the next stop after 29 s.
    h.state_mut()
        .other
        .as_mut()
        .unwrap()
        .store
        .push_event(Event {
            t_ns: 30_000_000_000,
            kind: EventKind::Marker("B's change".into()),
        });
    h.state_mut().timeline.as_mut().unwrap().seek(29.0);
    h.run_steps(1);
    h.get_by_label("Next event").click();
    h.run_steps(2);
    assert_eq!(h.state().timeline.as_ref().unwrap().playhead_s, 30.0);
    h.state_mut().timeline.as_mut().unwrap().seek(mid * 2.0);
    h.run_steps(2);
    h.snapshot("compare_arena_baseline");
    h.get_by_label("Stop comparing").click();
    h.run_steps(2);
    assert!(h.state().other.is_none());
    h.get_by_label("Compare with…");
}

#[test]
fn a_replay_compares_with_a_recording_from_the_browser() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(golden_v1(), dir.path().join("before.flr")).unwrap();
    let mut h = harness(&support::recording("golden/v2.flr"));
    h.state_mut().recordings_dir = dir.path().to_owned();
    h.get_by_label("Compare with…").click();
    h.run_steps(3);
    assert!(h.state().browser_open && h.state().browsing_for_compare);
    h.get_by_label("Compare with recording");
    h.get_by_label_contains("before.flr").click();
    h.run_steps(3);
    let d = h.state();
    assert!(!d.browser_open);
    assert!(
        d.source.meta().label.contains("v2.flr"),
        "A stays the source"
    );
    let other = d.other.as_ref().expect("B is open");
    assert!(other.meta.label.contains("before.flr"));
    // Each side's line is on the plot: two legend entries per channel plot.
    h.get_by_label("Stop comparing");
    assert!(h.get_all_by_label("B").count() >= 3);
}

/// A replay that holds every n-th sample of a long recording, zoomed in to
/// a few minutes, reads those minutes from the file at full resolution and
/// draws every sample; the status line says so.
#[test]
fn zooming_into_a_thinned_replay_reads_every_sample_in_view_from_disk() {
    use flatline_telemetry::recording::{RecordingSetup, synth};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two-hours.flr");
    let cfg = synth::SynthConfig {
        hours: 2.0,
        hz: 10.0,
        channels: 4,
        seed: 3,
    };
    let setup = RecordingSetup::new("synth");
    synth::write(cfg, &path, false, |schema| setup.header(schema, Vec::new())).unwrap();
    // 72,000 samples held in about 4,000.
    let (src, store) = ReplaySource::open_within(&path, 4_000 * 8 * 8).unwrap();
    assert!(store.len() < 9_000, "{} held", store.len());
    let dash = Dashboard::new(Box::new(src), store, Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    h.run_steps(3);
    assert_eq!(h.state().view.plots.zoom, None, "the whole run is in view");
    // Zoom in over the first plot, as a pinch or ctrl+wheel does.
    // The first plot's title, whatever unit it chose.
    let title = h
        .get(egui_kittest::kittest::By::new().label_contains("mem.rss ("))
        .rect();
    // Over the middle of its plot, right of the y axis's labels.
    let over_plot = eframe::egui::pos2(800.0, title.bottom() + 40.0);
    for _ in 0..7 {
        h.hover_at(over_plot);
        h.event(eframe::egui::Event::Zoom(2.0));
        h.run_steps(1);
    }
    let zoom = h.state().view.plots.zoom.expect("zoomed in");
    assert!(zoom[1] - zoom[0] < 7_200.0 / 50.0, "{zoom:?}");
    // The read runs on its own thread: wait for it, a frame at a time.
    for _ in 0..200 {
        h.run_steps(1);
        let d = h.state();
        if d.view
            .plots
            .zoom
            .is_some_and(|z| d.detail.as_ref().unwrap().covering(z).is_some())
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let d = h.state();
    let z = d.view.plots.zoom.unwrap();
    let loaded = d
        .detail
        .as_ref()
        .unwrap()
        .covering(z)
        .expect("read from disk");
    // Every sample of the file in the loaded span: 10 a second, none thinned.
    let span = loaded.span;
    let inside = loaded
        .times
        .iter()
        .filter(|&&t| t >= span[0] && t <= span[1])
        .count();
    let want = ((span[1] - span[0]) * 10.0).round() as usize;
    assert!(inside.abs_diff(want) <= 2, "{inside} samples in {span:?}");
    let held = d
        .store
        .times()
        .iter()
        .filter(|&&t| t >= span[0] && t <= span[1])
        .count();
    assert!(held * 8 < inside, "the store held {held} of them");
    h.run_steps(1);
    h.get_by_label_contains("every sample in view");
    // f: all of it again.
    h.key_press(eframe::egui::Key::F);
    h.run_steps(3);
    assert_eq!(
        h.state().view.plots.zoom,
        None,
        "f fits every plot to all of its data"
    );
}

/// `replay` brings the window up before the recording is read: the first
/// frames say what is being read, and the recording appears when it is.
/// The file is a FIFO that the test fills only after looking, so the read
/// cannot finish first however fast the machine.
#[test]
fn a_window_opening_a_recording_is_up_before_the_recording_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("slow.flr");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let dash = Dashboard::opening(fifo.clone(), Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    h.run_steps(3);
    h.get_by_label_contains("Reading ");
    h.get_by_label_contains("opening…");
    assert_eq!(h.state().store.len(), 0);
    assert!(
        h.query_by_label_contains("to judge").is_none(),
        "no verdict before there is data"
    );
    let bytes = std::fs::read(support::recording("golden/v3.flr")).unwrap();
    std::fs::write(&fifo, bytes).unwrap();
    for _ in 0..200 {
        if h.state().opening.is_none() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        h.run_steps(1);
    }
    assert!(h.state().opening.is_none(), "read within 2 s");
    h.run_steps(2);
    assert_eq!(h.state().store.len(), 61);
    h.get_by_label("file slow.flr");
    h.get_by_label("mem.rss (MiB)");
}

/// Closing a live window while it records (its source dropped) finishes the
/// recording its workload process writes, with a footer, however busy that
/// process is.
#[test]
fn closing_a_recording_live_window_finishes_its_file() {
    use flatline_arena::workload::driver::Workload;
    use flatline_dashboard::ui::{LiveSource, ServeConfig, Source};
    let flatline = std::path::Path::new(env!("CARGO_BIN_EXE_flatline"));
    let (mut src, mut store) =
        LiveSource::start_with(flatline, ServeConfig::new(Workload::Both, 50.0)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("closed.flr");
    src.start_recording(&path).unwrap();
    // A few seconds of a busy workload, recorded.
    let grew = support::wait_for(std::time::Duration::from_millis(50), || {
        src.poll(&mut store);
        (store.len() >= 150).then_some(())
    });
    assert!(grew.is_some(), "{} samples", store.len());
    drop(src);
    let rec = flatline_telemetry::recording::Recording::open(&path).unwrap();
    assert!(rec.tail.is_none(), "no footer: {:?}", rec.tail);
    assert_eq!(
        rec.footer.as_ref().map(|f| f.end.as_str()),
        Some("window closed")
    );
}

/// A watch window whose recording's disk fills says so in red above the
/// plots, with the file, the cause and what is on disk, and notes it in
/// the stream; with `stop` the recording ends and the watch goes on.
#[test]
fn a_full_disk_turns_the_watch_windows_banner_red() {
    use flatline_dashboard::ui::WatchSource;
    use flatline_telemetry::recording::{RecordingSetup, event_channel};
    use flatline_telemetry::{SamplerConfig, Target};
    let Some(disk) = support::SmallDisk::mount(20) else {
        return;
    };
    let out = disk.path("w.flr");
    let events = event_channel();
    let cfg = SamplerConfig {
        hz: 1000.0,
        target: Target::Pid(std::process::id()),
        tree: false,
        gpu: false,
        events: Some(events.0.clone()),
        ..SamplerConfig::default()
    };
    let (src, store) = WatchSource::start(
        std::process::id(),
        cfg,
        Vec::new(),
        events,
        RecordingSetup::new("watch"),
        Some(&out),
        false,
        flatline_cli::cli::OnWriteError::Stop,
        None,
    )
    .unwrap();
    let dash = Dashboard::new(Box::new(src), store, Settings::default());
    let mut h = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(frame, dash);
    let t0 = std::time::Instant::now();
    while h.state().source.write_fault().is_none() && t0.elapsed() < support::PATIENCE {
        std::thread::sleep(std::time::Duration::from_millis(50));
        h.run_steps(1);
    }
    h.run_steps(2);
    h.get_by_label_contains("Not recorded: cannot write");
    let text = h.state().source.write_fault().unwrap();
    h.get_by_label_contains(&text);
    assert!(text.contains(out.to_str().unwrap()), "{text}");
    assert_eq!(text.matches("No space left on device").count(), 1, "{text}");
    assert!(text.contains("recording stopped"), "{text}");
    let d = h.state();
    assert!(
        d.store
            .events()
            .iter()
            .any(|e| matches!(&e.kind, flatline_telemetry::recording::EventKind::Note(n) if n.starts_with("recording fault"))),
        "the stream notes the fault"
    );
    // Sampling goes on after the recording stopped.
    let n = d.store.len();
    let t1 = std::time::Instant::now();
    while h.state().store.len() <= n && t1.elapsed() < support::PATIENCE {
        std::thread::sleep(std::time::Duration::from_millis(50));
        h.run_steps(1);
    }
    assert!(h.state().store.len() > n);
}

/// Compare mode on a leak and its fix, both watched with `--sites`: the
/// verdicts panel names the line that no longer grows, as the receipt does.
#[test]
fn compare_mode_names_the_line_that_stopped_growing() {
    let h = compare_harness(
        &support::recording("watch-sites-pair-leak.flr"),
        &support::recording("watch-sites-pair-fixed.flr"),
    );
    h.get_by_label_contains("By line of code: sites_pair.py:13 no longer grows in B (");
}

/// A recording that gains a site half-way: at its start the flame graph
/// holds nothing; at its end, the site's frame and its caller with its
/// last reading; the playhead moves it.
#[test]
fn the_flame_graph_reads_the_playhead_as_sites_join() {
    use flatline_telemetry::{ChannelSpec, Group, Sample, Unit};
    let spec = |n: &str, labels: &[(&str, &str)]| {
        labels.iter().fold(
            ChannelSpec::new(n, Unit::Bytes, Group::Memory),
            |c, (k, v)| c.with_label(k, *v),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.flr");
    let mut w = support::watch_recording(&path, vec![spec("mem.rss", &[])]);
    let at = |i: u64, v: &[f64]| Sample::from_values(i, i * 100_000_000, v);
    for i in 0..20 {
        w.push_sample(&at(i, &[1e8])).unwrap();
    }
    let site = [("pid", "7"), ("role", "site")];
    let mut live = site.to_vec();
    live.extend([
        ("frames", "/w/job.py:5 keep\n/w/job.py:9 main"),
        ("line", "5"),
    ]);
    w.add_channels(&[spec("site0.live", &live)]).unwrap();
    for i in 20..40 {
        let mib = (i - 19) as f64 * 1_048_576.0;
        w.push_sample(&at(i, &[1e8, mib])).unwrap();
    }
    w.finish("completed").unwrap();
    let mut h = harness(&path);
    h.get_by_label_contains("Flame graph: live bytes by stack at 3.9 s");
    h.get_by_label_contains("20.00 MiB in 1 site,");
    h.get_all_by_label("keep job.py:5")
        .next()
        .expect("the site's frame");
    h.get_all_by_label("main job.py:9")
        .next()
        .expect("its caller");
    h.get_by_label("Start").click();
    h.run_steps(2);
    h.get_by_label_contains("Flame graph: live bytes by stack at 0.0 s");
    h.get_by_label_contains("0 B in 0 sites");
    assert_eq!(h.query_all_by_label("keep job.py:5").count(), 0);
}

/// The processes panel reads the findings (where each process's memory
/// grew) the frame loop makes before any view draws, beside a comparison
/// too: they were once made while the banner drew, which a comparison does
/// not draw, so its panel never named where a process grew (and a single
/// run's showed the frame before's).
#[test]
fn the_processes_panel_names_where_memory_grew_beside_a_comparison() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings/headlines");
    let h = compare_harness(&dir.join("leak-py312.flr"), &dir.join("leak-py313.flr"));
    let largest = h
        .state()
        .findings
        .tree()
        .and_then(|t| t.processes.iter().find_map(|p| p.where_.as_ref()))
        .map(|w| w.largest.clone());
    assert_eq!(
        largest.as_deref(),
        Some("heap"),
        "the job's growth is in its heap"
    );
    h.get_by_label_contains("Processes (1 live");
    h.get_by_label("python3.12  heap 99 %");
}
