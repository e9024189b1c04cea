//! The tree probe's tests: its /proc parsers, its walks and its channels,
//! on real process trees.

use super::*;

#[test]
fn stat_lines_with_odd_names_parse() {
    let s = "4242 (python3 (w) x) S 4000 4242 4000 0 -1 4194304 10 0 0 0 1 2 0 0 20 0 3 0 987654 100 200";
    let st = parse_stat_line(s).unwrap();
    assert_eq!(st.comm, "python3 (w) x");
    assert_eq!((st.state, st.ppid, st.start), (b'S', 4000, 987654));
    assert_eq!(parse_stat_line("12 (cut) S 1"), None);
}

/// The fast estimate counts faults that added no resident page: a copy
/// on write, not a first touch nor a file page mapped from the cache.
#[test]
fn faults_without_new_resident_pages_read_as_copies() {
    let page = 4096;
    let at = |minflt, anon, file| Counts {
        minflt,
        anon: anon * page,
        shared: file * page,
    };
    let before = at(1000, 500, 100);
    // 300 pages copied on write: faults, RSS where it was.
    assert_eq!(copied_bytes(before, at(1300, 500, 100), page), 300 * page);
    // 300 pages of new memory touched: faults, and 300 more resident.
    assert_eq!(copied_bytes(before, at(1300, 800, 100), page), 0);
    // 300 file pages mapped from the page cache.
    assert_eq!(copied_bytes(before, at(1300, 500, 400), page), 0);
    // Both at once: only the copies are left.
    assert_eq!(copied_bytes(before, at(1500, 600, 200), page), 300 * page);
    // Memory given back is not a copy, and fewer faults never underflow.
    assert_eq!(copied_bytes(before, at(1000, 200, 100), page), 0);
    assert_eq!(copied_bytes(before, at(900, 500, 100), page), 0);
    // A huge page: one fault, 512 pages resident.
    assert_eq!(copied_bytes(before, at(1001, 1012, 100), page), 0);
}

#[test]
fn statm_gives_resident_and_shared_bytes() {
    assert_eq!(
        parse_statm("30000 2500 1000 200 0 9000 0\n", 4096),
        Some((2500 * 4096, 1000 * 4096))
    );
    assert_eq!(parse_statm("30000\n", 4096), None);
    assert_eq!(parse_statm("0 0 0 0 0 0 0\n", 4096), None, "a zombie's");
}

#[test]
fn rollups_give_pss_and_uss() {
    let text = "00400000-7ff [rollup]\nRss:  1752 kB\nPss:  770 kB\nShared_Clean: 1568 kB\n\
                Private_Clean:  68 kB\nPrivate_Dirty:  116 kB\nSwapPss:  4 kB\n";
    let r = parse_rollup(text).unwrap();
    assert_eq!(r.rss, 1752.0 * 1024.0);
    assert_eq!(r.pss, 770.0 * 1024.0);
    assert_eq!(r.uss, 184.0 * 1024.0);
    assert_eq!(r.swap_pss, 4.0 * 1024.0);
    assert_eq!(parse_rollup(""), None, "an exited process has no rollup");
}

/// A fake `/proc`: `(pid, ppid, comm, exe, cmdline, rss_kb, pss_kb)`.
fn fake_proc(dir: &Path, procs: &[(u32, u32, &str, &str, &str, u64, u64)]) {
    for entry in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_dir_all(entry.unwrap().path()).unwrap();
    }
    for &(pid, ppid, comm, exe, cmdline, rss, pss) in procs {
        let d = dir.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let stat = format!(
            "{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 {} 0 0",
            1000 + pid
        );
        std::fs::write(d.join("stat"), stat).unwrap();
        let pages = rss * 1024 / flatline_arena::sys::page_size();
        std::fs::write(
            d.join("statm"),
            format!("{} {pages} 0 0 0 0 0\n", 2 * pages),
        )
        .unwrap();
        let rollup = format!(
            "Rss: {rss} kB\nPss: {pss} kB\nPrivate_Dirty: {} kB\n",
            pss / 2
        );
        std::fs::write(d.join("smaps_rollup"), rollup).unwrap();
        std::fs::write(d.join("cmdline"), cmdline).unwrap();
        std::os::unix::fs::symlink(exe, d.join("exe")).unwrap();
    }
}

/// Reads once and applies the schema changes the way the sampler does.
fn reading(p: &mut TreeProbe, grown: &mut crate::dynamic::Grown) -> [f64; 9] {
    let mut out = [0.0; 9];
    p.read(&mut out).unwrap();
    p.dynamic(&mut DynamicChannels { grown });
    out
}

#[test]
fn a_faked_tree_gives_roles_events_channels_and_rounds() {
    use crate::Schema;
    use crate::dynamic::{Grown, SchemaFeed};
    use flatline_format::Item;
    let tmp = tempfile::tempdir().unwrap();
    let proc_root = tmp.path();
    let py = "/usr/bin/python3";
    let tree = [
        (
            10,
            1,
            "torchrun",
            py,
            "python3\0/bin/torchrun\0train.py\0",
            1000,
            600,
        ),
        (11, 10, "python3", py, "python3\0train.py\0", 2000, 1500),
        (
            12,
            11,
            "pt_data_worker",
            py,
            "python3\0train.py\0",
            2000,
            300,
        ),
        (13, 11, "sh", "/bin/sh", "sh\0-c\0nvidia-smi\0", 100, 40),
        (99, 1, "elsewhere", py, "", 100, 50),
    ];
    fake_proc(proc_root, &tree);
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut p = TreeProbe::with_proc_root(proc_root, 10, true, Some(tx), Clock::start());
    let mut grown = Grown::new(&Schema::default());
    let feed = SchemaFeed::default();
    let first = reading(&mut p, &mut grown);
    assert_eq!(first[4], 4.0, "the tree, not pid 99");
    assert_eq!(first[0], (1000 + 2000 + 2000 + 100) as f64 * 1024.0);
    assert_eq!(first[1], (600 + 1500 + 300 + 40) as f64 * 1024.0);
    assert_eq!(first[2], (300 + 750 + 150 + 20) as f64 * 1024.0);
    assert!(
        rx.try_recv().is_err(),
        "starts are told at the second sighting"
    );
    assert_eq!(
        grown.publish_changes(0, &feed),
        0,
        "no channels before then"
    );
    reading(&mut p, &mut grown);
    let roles: Vec<(u32, String)> = rx
        .try_iter()
        .filter_map(|e| match e.kind {
            EventKind::ProcessStarted { pid, role, .. } => Some((pid, role)),
            _ => None,
        })
        .collect();
    assert_eq!(
        roles,
        [
            (10, "main".into()),
            (11, "rank".into()),
            (12, "worker".into()),
            (13, "other".into())
        ]
    );
    assert_eq!(grown.publish_changes(0, &feed), 16);
    let mut added = Vec::new();
    feed.take_all(|c| {
        if let Item::Add(specs) = c {
            added.extend(specs.into_iter().map(|s| s.name));
        }
    });
    assert_eq!(added.len(), 16);
    assert!(added.contains(&"pid12.pss".to_string()));
    assert!(added.contains(&"pid12.cow".to_string()));

    // The worker exits; its channels end and its exit is told.
    fake_proc(proc_root, &[tree[0], tree[1], tree[3]]);
    let out = reading(&mut p, &mut grown);
    assert_eq!(out[4], 3.0);
    assert!(matches!(
        rx.try_recv().map(|e| e.kind),
        Ok(EventKind::ProcessExited { pid: 12, .. })
    ));
    grown.publish_changes(1, &feed);
    let mut ended = Vec::new();
    feed.take_all(|c| {
        if let Item::End(p) = c {
            ended.extend(p);
        }
    });
    assert_eq!(ended.len(), 4);

    // A member that exited but is listed still (a zombie: its statm
    // reads zeros, it has no rollup) gives no sums, not smaller ones.
    let before = reading(&mut p, &mut grown);
    assert!(before[0] > 0.0 && before[1] > 0.0, "{before:?}");
    std::fs::write(proc_root.join("13/statm"), "0 0 0 0 0 0 0\n").unwrap();
    std::fs::write(proc_root.join("13/smaps_rollup"), "").unwrap();
    // (The fake's files are new files: held ones would read the old.)
    p.held.clear();
    let out = reading(&mut p, &mut grown);
    assert!(out[0].is_nan() && out[1].is_nan(), "{out:?}");

    // The root gone: the watch is over.
    fake_proc(proc_root, &[tree[1]]);
    assert!(matches!(
        p.read(&mut [0.0; 9]),
        Err(ProbeError::Gone { pid: 10 })
    ));
}

/// A budget that allows one page-table walk in all: the others wait, and
/// the sums are not published (never sums of part of the tree), while RSS
/// and the count keep coming.
#[test]
fn a_spent_budget_delays_the_sums_and_never_publishes_part_of_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let py = "/usr/bin/python3";
    fake_proc(
        tmp.path(),
        &[
            (10, 1, "python3", py, "", 1000, 600),
            (11, 10, "python3", py, "", 1000, 500),
        ],
    );
    let mut p = TreeProbe::with_proc_root(tmp.path(), 10, false, None, Clock::start())
        .with_budget(0.0, 0.0);
    for _ in 0..3 {
        let mut out = [0.0; 9];
        p.read(&mut out).unwrap();
        assert_eq!((out[0], out[4]), (2000.0 * 1024.0, 2.0));
        assert!(
            out[1].is_nan() && out[2].is_nan() && out[3].is_nan(),
            "{out:?}"
        );
    }
    // More budget: the round completes.
    p.round_ns = 1e9;
    let mut out = [0.0; 9];
    p.read(&mut out).unwrap();
    assert_eq!(out[1], 1100.0 * 1024.0);
}

/// With budget for one walk a reading, a process whose faults say its
/// pages are being copied is walked before the round's next turn, and
/// its copies count in `tree.cow`.
#[test]
fn a_process_copying_pages_is_walked_first() {
    let tmp = tempfile::tempdir().unwrap();
    let py = "/usr/bin/python3";
    let tree = [
        (10, 1, "python3", py, "", 1000, 600),
        (11, 10, "python3", py, "", 1000, 500),
        (12, 10, "python3", py, "", 1000, 500),
    ];
    fake_proc(tmp.path(), &tree);
    let mut p = TreeProbe::with_proc_root(tmp.path(), 10, false, None, Clock::start())
        .with_budget(0.0, 0.0);
    p.mover_every_ns = 0;
    // At most one walk from each bucket that has room.
    let walk_with = |p: &mut TreeProbe, round: bool, mover: bool| {
        p.round_ns = if round { 0.0 } else { -1e18 };
        p.mover_ns = if mover { 0.0 } else { -1e18 };
        let mut out = [0.0; 9];
        p.read(&mut out).unwrap();
        let mut walked: Vec<u32> = p
            .members
            .iter()
            .filter(|(_, m)| m.fresh)
            .map(|(&pid, _)| pid)
            .collect();
        walked.sort_unstable();
        (walked, out)
    };
    let walk = |p: &mut TreeProbe| walk_with(p, true, true);
    assert_eq!(walk(&mut p).0, [10], "new processes from the round's share");
    assert_eq!(walk(&mut p).0, [11]);
    let (walked, out) = walk(&mut p);
    assert_eq!(walked, [12]);
    assert_eq!(out[1], 1600.0 * 1024.0, "the round is whole");
    assert_eq!(out[7], 0.0);
    // pid 12 faults 1,000 pages with its RSS where it was: copies.
    set_minflt(tmp.path(), 12, 1000);
    // With the round's share spent, the movers' still walks it.
    let (walked, out) = walk_with(&mut p, false, true);
    assert_eq!(walked, [12], "the mover, from the movers' share");
    assert_eq!(out[7], 1000.0 * p.page as f64);
    // Still: it has not copied since its walk, so the round goes on.
    assert_eq!(walk(&mut p).0, [10]);
    // Once its settling walks are due, it has SETTLE_WALKS of them (its
    // level seen holding), then the movers' share walks no one.
    p.settle_every_ns = 0;
    for _ in 0..SETTLE_WALKS {
        assert_eq!(walk_with(&mut p, false, true).0, [12]);
    }
    assert_eq!(walk_with(&mut p, false, true).0, Vec::<u32>::new());
}

/// Rewrites a faked process's rollup (kB).
fn set_rollup(dir: &Path, pid: u32, rss: u64, pss: u64, uss: u64) {
    std::fs::write(
        dir.join(format!("{pid}/smaps_rollup")),
        format!("Rss: {rss} kB\nPss: {pss} kB\nPrivate_Dirty: {uss} kB\n"),
    )
    .unwrap();
}

/// A big tree, walked one process a reading: the sums wait only for the
/// first walk of each process that was there when the watch began, then
/// come at every reading. A process born in the tree counts from its
/// first sighting, unwalked; a worker's copies carry the sums between
/// walks once its own walks confirm they are copies, and faults its walks
/// contradict move no figure.
#[test]
fn the_sums_come_at_every_reading_carried_forward_by_confirmed_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let py = "/usr/bin/python3";
    let mut tree = vec![
        (10, 1, "python3", py, "", 1000, 600),
        (11, 10, "python3", py, "", 10000, 400),
        (12, 10, "python3", py, "", 10000, 400),
    ];
    fake_proc(dir, &tree);
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut p =
        TreeProbe::with_proc_root(dir, 10, false, Some(tx), Clock::start()).with_budget(0.0, 0.0);
    p.mover_every_ns = 0;
    let page = p.page as f64;
    // One walk (`true`) or none at a reading.
    let read = |p: &mut TreeProbe, walk: bool| {
        p.held.clear();
        p.round_ns = if walk { 0.0 } else { -1e18 };
        p.mover_ns = if walk { 0.0 } else { -1e18 };
        let mut out = [0.0; 9];
        p.read(&mut out).unwrap();
        out
    };
    assert!(read(&mut p, true)[1].is_nan(), "11 and 12 not walked yet");
    assert!(read(&mut p, true)[1].is_nan());
    let whole = read(&mut p, true);
    assert_eq!(whole[1], 1400.0 * 1024.0, "the first round");
    assert_eq!(whole[2], 700.0 * 1024.0);
    assert!(whole[8] >= 0.0, "its age: {}", whole[8]);
    // A worker forks: born in the tree, it counts (as nothing, a fork
    // adds nothing to the PSS) before it is walked.
    tree.push((13, 10, "python3", py, "", 1000, 0));
    fake_proc(dir, &tree);
    // Its parent's USS is stale (what it had to itself it shares now):
    // the tree's USS waits for the parent's walk, which comes first.
    let out = read(&mut p, false);
    assert_eq!(out[1], 1400.0 * 1024.0);
    assert!(out[2].is_nan(), "{out:?}");
    assert!(
        p.members[&10].estimate().is_none(),
        "nor its own until walked"
    );
    let out = read(&mut p, true);
    assert!(p.members[&10].fresh && !p.members[&13].fresh);
    assert_eq!((out[1], out[2]), (1400.0 * 1024.0, 700.0 * 1024.0));
    // Its first walk is its turn in the round, in pid order.
    for pid in [11, 12, 13] {
        assert_eq!(read(&mut p, true)[1], 1400.0 * 1024.0);
        assert!(p.members[&pid].fresh, "{pid}'s turn");
    }
    // Worker 12 faults 1,000 pages with its RSS flat: not yet confirmed
    // as copies, they move no sum.
    set_minflt(dir, 12, 1000);
    assert_eq!(read(&mut p, false)[1], 1400.0 * 1024.0);
    // Its walk (first: it moves) shows its USS rose by those pages:
    // confirmed, its copies count from the sums' base on.
    let kb = 1000.0 * page / 1024.0;
    set_rollup(dir, 12, 10000, 400 + kb as u64, 200 + kb as u64);
    let out = read(&mut p, true);
    assert!(p.members[&12].fresh && p.members[&12].confirmed);
    assert_eq!(out[1], 1400.0 * 1024.0 + 1000.0 * page);
    // 500 more copies, no walk: the sums follow at the next reading.
    set_minflt(dir, 12, 1500);
    let out = read(&mut p, false);
    assert_eq!(out[1], 1400.0 * 1024.0 + 1500.0 * page);
    assert_eq!(out[2], 700.0 * 1024.0 + 1500.0 * page);
    // Worker 11's faults, contradicted by its walk (its USS did not
    // move: memory unmapped and touched again), move nothing, and it is
    // told once.
    set_minflt(dir, 11, 2000);
    read(&mut p, false);
    let out = read(&mut p, true);
    assert!(p.members[&11].fresh && !p.members[&11].confirmed);
    assert_eq!(out[1], 1400.0 * 1024.0 + 1500.0 * page);
    let notes: Vec<String> = rx
        .try_iter()
        .filter_map(|e| match e.kind {
            EventKind::Note(n) => Some(n),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("process 11 (python3): its faults"),
        "{notes:?}"
    );
    // Worker 12 exits: its own pages (its USS) leave the sum, the pages
    // it shared stay with the others.
    let uss12 = p.members[&12].estimate().unwrap().uss;
    let before = read(&mut p, false)[1];
    tree.retain(|t| t.0 != 12);
    fake_proc(dir, &tree);
    let after = read(&mut p, false)[1];
    assert!(
        (before - after - uss12).abs() < 1.0,
        "{before} {after} {uss12}"
    );
}

/// Processes that move take at most 1 − ROUND_SHARE of the budget: with
/// a copier walked as often as it may be, the round still completes and
/// the sums are re-based on it.
#[test]
fn movers_never_starve_the_round() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let py = "/usr/bin/python3";
    let tree: Vec<_> = std::iter::once((10, 1, "python3", py, "", 1000, 600))
        .chain((11..=14).map(|pid| (pid, 10, "python3", py, "", 1000, 400)))
        .collect();
    fake_proc(dir, &tree);
    let mut p =
        TreeProbe::with_proc_root(dir, 10, false, None, Clock::start()).with_budget(0.01, 0.0);
    p.mover_every_ns = 0;
    // The first walks: all of them, on credit.
    p.round_ns = 1e12;
    let mut out = [0.0; 9];
    p.read(&mut out).unwrap();
    assert_eq!(out[1], 2200.0 * 1024.0);
    p.round_ns = 0.0;
    // Worker 11 copies at every reading, so it is always due for a walk;
    // the budget allows a walk every several readings. Its walks stop at
    // the movers' share, and the others get their turns from the rest.
    let mut walked_round = std::collections::HashSet::new();
    let (mut movers, mut others) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut i = 0u64;
    while walked_round.len() < 4 && std::time::Instant::now() < deadline {
        i += 1;
        set_minflt(dir, 11, 1000 * i);
        p.held.clear();
        p.read(&mut out).unwrap();
        for (&pid, m) in &p.members {
            if m.fresh {
                if pid == 11 {
                    movers += 1;
                } else {
                    others += 1;
                    walked_round.insert(pid);
                }
            }
        }
    }
    assert!(movers > 0, "the mover is walked too");
    assert!(others > 0);
    assert_eq!(walked_round.len(), 4, "{walked_round:?}");
}

/// A member's `stat` and `statm` are read through files held open, and
/// a held file of a process that has exited (and been reaped) reads as
/// an error, never as the dead process's last figures: so the member
/// leaves the tree, and a new process given the same pid is opened anew.
#[test]
fn held_files_read_the_live_process_and_fail_once_it_is_gone() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut p = TreeProbe::new(pid, false, None, Clock::start());
    let mut out = [0.0; 9];
    p.read(&mut out).unwrap();
    p.read(&mut out).unwrap();
    assert!(p.held.contains_key(&(pid, Held::Stat)), "{:?}", p.held);
    assert!(p.held.contains_key(&(pid, Held::Statm)));
    assert!(out[0] > 0.0, "the tree's RSS read through them");
    child.kill().unwrap();
    child.wait().unwrap();
    let f = &p.held[&(pid, Held::Stat)];
    let mut buf = String::new();
    assert!(!read_from_start(f, &mut buf), "read {buf:?}");
    assert!(p.read(&mut out).is_err(), "the root is gone");
}

/// Rewrites a faked process's minor-fault count.
fn set_minflt(dir: &Path, pid: u32, minflt: u64) {
    let path = dir.join(format!("{pid}/stat"));
    let stat = std::fs::read_to_string(&path).unwrap();
    let mut fields: Vec<String> = stat.split(' ').map(str::to_owned).collect();
    fields[9] = minflt.to_string();
    std::fs::write(path, fields.join(" ")).unwrap();
}

/// A sample with room for six processes' channels: the root and one
/// more get theirs at once, the flat rest wait; when five begin to copy
/// the four most copying take the room kept for them and the fifth the
/// channels of the flat one, so no process that moves goes unwatched.
#[test]
fn processes_that_copy_get_channels_before_flat_ones() {
    use crate::Schema;
    use crate::dynamic::Grown;
    let tmp = tempfile::tempdir().unwrap();
    let py = "/usr/bin/python3";
    let mut tree = vec![(10, 1, "python3", py, "", 1000, 600)];
    tree.extend((11..=16).map(|pid| (pid, 10, "python3", py, "", 1000, 500)));
    fake_proc(tmp.path(), &tree);
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut p = TreeProbe::with_proc_root(tmp.path(), 10, true, Some(tx), Clock::start());
    let room = PROCESS_CHANNELS.len() * (MOVER_ROOM + 2);
    let schema = Schema {
        channels: (0..crate::MAX_CHANNELS - room)
            .map(|i| ChannelSpec::new(format!("c{i}"), crate::Unit::Bytes, crate::Group::Memory))
            .collect(),
    };
    let mut grown = Grown::new(&schema);
    reading(&mut p, &mut grown);
    reading(&mut p, &mut grown);
    let watched = |p: &TreeProbe| {
        let mut w: Vec<u32> = p
            .members
            .iter()
            .filter(|(_, m)| m.channels.is_some())
            .map(|(&pid, _)| pid)
            .collect();
        w.sort_unstable();
        w
    };
    assert_eq!(watched(&p), [10, 11]);
    let notes = |rx: &crossbeam_channel::Receiver<Event>| -> Vec<String> {
        rx.try_iter()
            .filter_map(|e| match e.kind {
                EventKind::Note(n) => Some(n),
                _ => None,
            })
            .collect()
    };
    let first = notes(&rx);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(
        first[0].starts_with("process 12 and later flat ones"),
        "{first:?}"
    );
    // 12…16 copy, 16 most; 11 stays flat.
    for pid in 12..=16u32 {
        set_minflt(tmp.path(), pid, 100 * u64::from(pid));
    }
    reading(&mut p, &mut grown);
    assert_eq!(watched(&p), [10, 12, 13, 14, 15, 16]);
    // (Their faked faults raised no USS: each is also told its faults
    // are not taken for copies.)
    let evicted: Vec<String> = notes(&rx)
        .into_iter()
        .filter(|n| n.contains("channels end"))
        .collect();
    assert_eq!(evicted.len(), 1, "{evicted:?}");
    assert!(
        evicted[0].starts_with("process 11's channels end")
            && evicted[0].ends_with("process 12, whose pages are being copied"),
        "{evicted:?}"
    );
}

#[test]
fn torchrun_agents_are_recognised() {
    assert!(is_agent(
        "/usr/bin/python3\0/venv/bin/torchrun\0--nproc-per-node=2\0train.py\0"
    ));
    assert!(is_agent("python\0-m\0torch.distributed.run\0train.py"));
    assert!(!is_agent("python\0train.py\0--torchrun-like"));
}
