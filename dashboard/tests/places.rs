//! Where the growth lives, as a user watches a job (issue 52): five
//! processes each grow about 8 MiB/s in one class of memory (the fixture
//! `tests/data/where_job.py`: small mallocs on the brk heap, anonymous
//! mappings of 256 KiB, a /dev/shm file written further, a mapped file
//! read further, and a loader keeping the 0.8 MiB /dev/shm batches its
//! worker sends, as a PyTorch DataLoader passes tensors), and the receipt
//! says which, process by process.

mod support;

use std::path::Path;
use std::process::Command;

#[test]
fn each_process_grows_in_its_own_class_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("where.flr");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/where_job.py");
    let o = Command::new(env!("CARGO_BIN_EXE_flatline"))
        .args(["watch", "--headless", "--hz", "10", "--out"])
        .arg(&out)
        .args(["--", "python3"])
        .arg(&fixture)
        .arg("12")
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    // "<class> <pid>" from each child.
    let children: Vec<(String, u64)> = stdout
        .lines()
        .filter_map(|l| {
            let (class, pid) = l.split_once(' ')?;
            ["heap", "anon", "shmem", "file", "loader"]
                .contains(&class)
                .then(|| Some((class.to_owned(), pid.trim().parse().ok()?)))?
        })
        .collect();
    assert_eq!(children.len(), 5, "{stdout}");
    let v = support::report(&out);
    let processes = v["process_tree"]["processes"].as_array().unwrap();
    for (class, pid) in &children {
        let p = processes
            .iter()
            .find(|p| p["pid"] == *pid)
            .unwrap_or_else(|| panic!("{class} {pid} not in the tree: {processes:?}"));
        let w = &p["where"];
        let class = if class == "loader" { "shmem" } else { class };
        assert_eq!(w["largest"], class, "{class} {pid}: {w}");
        assert!(w["share"].as_f64().unwrap() >= 0.8, "{class} {pid}: {w}");
        // About 8 MiB/s over the readings compared.
        let span = w["to_s"].as_f64().unwrap() - w["from_s"].as_f64().unwrap();
        let rate = w["classes"][class].as_f64().unwrap() / span / 1_048_576.0;
        assert!(
            (5.0..11.0).contains(&rate),
            "{class} {pid}: {rate} MiB/s, {w}"
        );
    }
    // The segment is named; the loader's batches are counted.
    let of = |class: &str| {
        let pid = children.iter().find(|c| c.0 == class).unwrap().1;
        &processes.iter().find(|p| p["pid"] == pid).unwrap()["where"]
    };
    let shm = of("shmem");
    assert!(
        shm["segments"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("/dev/shm/flatline-where-")),
        "{shm}"
    );
    let loader = of("loader");
    assert!(loader["new_segments"].as_f64().unwrap() >= 40.0, "{loader}");
    assert!(
        loader["text"]
            .as_str()
            .unwrap()
            .contains(" more segments, such as /dev/shm/flatline-where-batch-"),
        "{loader}"
    );
    // The text receipt names each class, and the mapped file is page
    // cache, not a leak of the program.
    let text = support::ok(&support::flatline(&["report", out.to_str().unwrap()]));
    for words in [
        "in the heap (brk)",
        "in anonymous memory",
        "in shared memory (/dev/shm/flatline-where-",
        "in mapped files: their page cache, which the kernel takes back under pressure; not a leak of the program",
    ] {
        assert!(text.contains(words), "no {words:?} in:\n{text}");
    }
    // Each reading is in the recording, not among the receipt's notes.
    assert!(!text.contains(") holds heap "), "{text}");
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(
        findings.iter().filter(|f| f["kind"] == "where").count(),
        5,
        "{findings:?}"
    );
}
