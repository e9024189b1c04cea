//! `flatline bench ui`: what a frame of the dashboard costs the CPU (the
//! egui pass plus tessellation, headless, as kittest runs it) with the
//! default plots, verdict cards and jump marks over a whole synthetic
//! recording, opened from disk as `flatline replay` opens it (so the
//! analyses run on the same trackers); how long opening it takes; and how
//! much memory a long live session holds.

use std::time::Instant;

use anyhow::{Context as _, Result};
use eframe::egui;
use flatline_telemetry::recording::{Header, HostFacts, RecordingWriter};
use flatline_telemetry::{ChannelSpec, Group, Sample, Schema, Unit};

use crate::ui::{Dashboard, ReplaySource, Settings, Store};
use flatline_cli::cli::UiBenchArgs;
use flatline_receipt::fmt::{bytes, nanos};
use flatline_telemetry::names;

/// The channels of a soak that the default view plots, plus the rest of a
/// typical schema, 34 in all.
fn schema() -> Schema {
    let mut ch: Vec<ChannelSpec> = [
        (names::MEM_RSS, Unit::Bytes, Group::Memory),
        (names::MEM_VM_DATA, Unit::Bytes, Group::Memory),
        (names::MEM_VM_PTE, Unit::Bytes, Group::Memory),
        (names::ALLOC_LIVE, Unit::Bytes, Group::Allocator),
        (names::MALLOC_ARENA, Unit::Bytes, Group::Malloc),
        (names::MALLOC_MMAP, Unit::Bytes, Group::Malloc),
        (names::WORK_OPS_PER_S, Unit::PerSecond, Group::Workload),
        (
            names::INGEST_FILL_NS_P50,
            Unit::Nanoseconds,
            Group::Workload,
        ),
    ]
    .into_iter()
    .map(|(n, u, g)| ChannelSpec::new(n, u, g))
    .collect();
    for i in 0..26 {
        ch.push(ChannelSpec::new(
            format!("extra.{i}"),
            Unit::Count,
            Group::Telemetry,
        ));
    }
    Schema { channels: ch }
}

/// Sample `i` at 100 Hz: staircases, a noisy rate and counters.
fn sample(i: u64, n: usize) -> Sample {
    let noise = ((i.wrapping_mul(2_654_435_761) >> 7) % 1000) as f64;
    let vals: Vec<f64> = (0..n)
        .map(|c| match c {
            0 => 1.3e9 + 262_144.0 * (i / 30_000) as f64,
            1 => 2.9e9 + 1_048_576.0 * (i / 200_000) as f64,
            2 => 4_300_800.0,
            3 => 36e6,
            4 => 950_272.0 + 4096.0 * (i / 90_000) as f64,
            5 => 40e6,
            6 => 4.1e8 + noise * 1e5,
            7 => 9000.0 + noise,
            _ => (i / (c as u64)) as f64,
        })
        .collect();
    Sample::from_values(i, i * 10_000_000, &vals)
}

/// Writes `samples` synthetic samples at 100 Hz to a new recording at
/// `path`, as a soak would; returns its size in bytes.
pub(crate) fn write_synthetic(path: &std::path::Path, samples: u64) -> Result<u64> {
    let schema = schema();
    let n = schema.len();
    let header = Header::new(
        "bench",
        schema,
        HostFacts::default(),
        Default::default(),
        vec![],
    );
    let mut w = RecordingWriter::create(path, &header, false)?;
    for i in 0..samples {
        w.push_sample(&sample(i, n))?;
    }
    Ok(w.finish("completed")?.bytes)
}

fn frame(ctx: &egui::Context, dash: &mut Dashboard) -> u64 {
    frame_with(ctx, dash, Vec::new())
}

/// Where the bench points to zoom: over the plots, right of the channel
/// list and left of the verdict cards.
const OVER_PLOTS: egui::Pos2 = egui::pos2(800.0, 420.0);

/// One frame with `events` as its input.
fn frame_with(ctx: &egui::Context, dash: &mut Dashboard, events: Vec<egui::Event>) -> u64 {
    let input = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(1600.0, 1000.0),
        )),
        events,
        ..Default::default()
    };
    let t0 = Instant::now();
    dash.tick();
    let mut out = ctx.run_ui(input, |ui| dash.show(ui));
    // No painter takes the font atlas's updates here; epaint asks that
    // they be cleared, not dropped.
    out.textures_delta.clear();
    let prims = ctx.tessellate(out.shapes, out.pixels_per_point);
    std::hint::black_box(prims);
    t0.elapsed().as_nanos() as u64
}

/// A live store fed a week at 10 Hz (46 times its cap) stays at its cap:
/// the samples fed, its size after one, three and seven days, its size and
/// the samples it holds at the end.
fn live_week(schema: &Schema) -> (u64, Vec<(u64, usize)>, usize, usize) {
    let n = schema.len();
    let day = 86_400 * 10;
    let live_samples = 7 * day;
    let mut live = Store::new(schema.clone(), crate::ui::LIVE_CAP);
    let mut live_by_day: Vec<(u64, usize)> = Vec::new();
    for i in 0..live_samples {
        live.push(&sample(i, n));
        if (i + 1) % day == 0 && matches!((i + 1) / day, 1 | 3 | 7) {
            live_by_day.push(((i + 1) / day, live.heap_bytes()));
        }
    }
    (live_samples, live_by_day, live.heap_bytes(), live.len())
}

pub fn run(args: &UiBenchArgs) -> Result<()> {
    let schema = schema();
    let n = schema.len();
    let samples = (args.hours * 360_000.0) as u64;

    // The synthetic recording, written to disk as a soak would write it
    // (or the one given).
    let t0 = Instant::now();
    let dir = tempfile::tempdir().context("creating a temporary folder")?;
    let (path, file_bytes) = match &args.file {
        Some(f) => (
            f.clone(),
            std::fs::metadata(f)
                .with_context(|| format!("reading {}", f.display()))?
                .len(),
        ),
        None => {
            let path = dir.path().join("bench.flr");
            let bytes = write_synthetic(&path, samples)?;
            (path, bytes)
        }
    };
    let build = t0.elapsed();

    // Opened as `flatline replay` opens it.
    let t0 = Instant::now();
    let (src, store) = ReplaySource::open(&path)?;
    let open_ns = t0.elapsed().as_nanos() as u64;
    let mut dash = Dashboard::new(Box::new(src), store, Settings::default());
    let ctx = egui::Context::default();
    // The very first frame also builds egui's fonts and caches; the next ones
    // also run the analyses the verdict cards show (about 2 ms of them a
    // frame, see `Store::begin_frame`): both are timed apart.
    let first_frame = frame(&ctx, &mut dash);
    let mut first: Vec<u64> = (0..12).map(|_| frame(&ctx, &mut dash)).collect();
    first.sort_unstable();
    let mut times: Vec<u64> = (0..args.frames).map(|_| frame(&ctx, &mut dash)).collect();
    times.sort_unstable();
    let (median, p95, max) = (
        times[times.len() / 2],
        times[times.len() * 95 / 100],
        times[times.len() - 1],
    );
    let first_max = first[first.len() - 1];
    let open_hours = args.hours;
    let zooms = zoomed_frames(&ctx, &mut dash, args.frames);

    let (live_samples, live_by_day, live_bytes, live_len) = live_week(&schema);

    if args.json {
        let v = serde_json::json!({
            "workload": "ui",
            "hours": args.hours,
            "channels": n,
            "samples": samples,
            "frames": args.frames,
            "frame_ns_median": median,
            "frame_ns_p95": p95,
            "frame_ns_max": max,
            "first_frame_ns": first_frame,
            "analysis_frame_ns_max": first_max,
            "store_build_ns": build.as_nanos() as u64,
            "open_hours": open_hours,
            "open_file_bytes": file_bytes,
            "open_ns": open_ns,
            "live_samples_fed": live_samples,
            "live_store_samples": live_len,
            "live_store_bytes": live_bytes,
            "zooms": zooms
                .iter()
                .map(|z| serde_json::json!({
                    "view_s": z.view_s,
                    "full_resolution": z.full,
                    "frame_ns_median": z.median,
                    "frame_ns_p95": z.p95,
                    "frame_ns_max": z.max,
                }))
                .collect::<Vec<_>>(),
            "live_store_bytes_by_day": live_by_day
                .iter()
                .map(|(d, b)| serde_json::json!({"day": d, "bytes": b}))
                .collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(());
    }
    let what = match &args.file {
        Some(f) => format!(
            "{}: {} samples held × {} channels",
            f.display(),
            flatline_receipt::fmt::thousands(dash.store.len() as u64),
            dash.store.schema().len()
        ),
        None => format!(
            "{:.1} h at 100 Hz: {} samples × {n} channels",
            args.hours,
            flatline_receipt::fmt::thousands(samples)
        ),
    };
    println!("ui  {what}, default plots over the whole range, 1600×1000");
    println!(
        "  frame (egui pass + tessellation, CPU, cards and jump marks): median {}   p95 {}   max {}   ({} frames)",
        nanos(median),
        nanos(p95),
        nanos(max),
        args.frames
    );
    for z in &zooms {
        println!(
            "  zoomed to {} of time{}: median {}   p95 {}   max {}",
            flatline_receipt::fmt::duration(z.view_s),
            if z.full { ", every sample" } else { "" },
            nanos(z.median),
            nanos(z.p95),
            nanos(z.max)
        );
    }
    println!(
        "  the first frame (fonts, caches): {}; the next 12, which also run the analyses: up to {}",
        nanos(first_frame),
        nanos(first_max)
    );
    println!(
        "  opening {} ({}): {}",
        match &args.file {
            Some(_) => "it".to_string(),
            None => format!("a {open_hours:.1} h recording"),
        },
        bytes(file_bytes as f64),
        nanos(open_ns)
    );
    println!(
        "  live store fed a week at 10 Hz ({} samples): {} kept, {} of arrays (bounded by its cap of {}); after {}",
        flatline_receipt::fmt::thousands(live_samples),
        flatline_receipt::fmt::thousands(live_len as u64),
        bytes(live_bytes as f64),
        flatline_receipt::fmt::thousands(crate::ui::LIVE_CAP as u64),
        live_by_day
            .iter()
            .map(|(d, b)| format!("{d} d: {}", bytes(*b as f64)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// Frame times at one zoom.
struct Zoomed {
    view_s: f64,
    /// Whether the view showed every sample of the file.
    full: bool,
    median: u64,
    p95: u64,
    max: u64,
}

/// Zooms in step by step (as a pinch or ctrl+wheel does, halving the time
/// in view each time) and times `frames` frames at each of a few zooms,
/// once any read at full resolution has landed.
fn zoomed_frames(ctx: &egui::Context, dash: &mut Dashboard, frames: usize) -> Vec<Zoomed> {
    let (t0, t1) = dash.store.time_range();
    let mut out = Vec::new();
    let mut halvings = 0;
    for target in [5, 9, 13] {
        while halvings < target {
            let events = vec![
                egui::Event::PointerMoved(OVER_PLOTS),
                egui::Event::Zoom(2.0),
            ];
            frame_with(ctx, dash, events);
            halvings += 1;
        }
        // Let the view settle and any read from disk land (a few seconds
        // at most).
        for _ in 0..500 {
            frame(ctx, dash);
            if !dash.detail.as_ref().is_some_and(|d| d.is_loading()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        frame(ctx, dash);
        let view = dash.view.plots.zoom.unwrap_or([t0, t1]);
        // Only a thinned replay has a detail reader; anything else holds
        // every sample.
        let full = dash
            .detail
            .as_ref()
            .is_none_or(|d| d.covering(view).is_some());
        let mut times: Vec<u64> = (0..frames).map(|_| frame(ctx, dash)).collect();
        times.sort_unstable();
        out.push(Zoomed {
            view_s: view[1] - view[0],
            full,
            median: times[times.len() / 2],
            p95: times[times.len() * 95 / 100],
            max: times[times.len() - 1],
        });
    }
    out
}
