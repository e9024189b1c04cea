//! The first sentence's own claims (that something grows, who, in what
//! memory, at which line; that it rose and held; that the allocator keeps
//! it; that the file was damaged or lost a stretch), read back from its
//! words: held to the receipt's own body on every shipped, corpus, golden
//! and headline-set recording, and to the truth of how each job was made
//! (`recordings/headlines/manifest.json`, the corpus's labels, damaged
//! copies of each format). `flatline bench headlines` prints the same.

mod support;

use std::path::PathBuf;

use flatline_cli::commands::headlines::{self, Outcome};
use flatline_cli::commands::report;
use flatline_telemetry::recording::Recording;

fn recordings() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["", "corpus", "golden", "headlines"] {
        for e in std::fs::read_dir(support::recording(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "flr") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 90, "{} recordings", out.len());
    out
}

#[test]
fn no_first_sentence_says_what_its_own_body_does_not() {
    let mut bad = Vec::new();
    for path in recordings() {
        let rec = Recording::open(&path).unwrap();
        let receipt = report::analyse(&rec, None);
        let a = receipt.assessment();
        let c = headlines::claims(&a.headline);
        for d in headlines::disagreements(&c, a) {
            bad.push(format!("{}: {d}\n    {}", path.display(), a.headline));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn no_first_sentence_makes_a_wrong_claim_of_a_job_whose_truth_is_known() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = headlines::evaluate_all(
        &support::recording("headlines"),
        &support::recording("corpus"),
        tmp.path(),
    )
    .unwrap();
    let mut wrong = Vec::new();
    for c in &cases {
        for j in c.judged.iter().filter(|j| j.outcome == Outcome::Wrong) {
            wrong.push(format!(
                "{} {}: {} ({})\n    {}",
                c.set, c.file, j.claim, j.detail, c.headline
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every kind of job the set was made for is in it, and judged.
    let judged = |claim: &str, o: Outcome| {
        cases
            .iter()
            .filter(|c| c.judged.iter().any(|j| j.claim == claim && j.outcome == o))
            .count()
    };
    for claim in [
        "settled",
        "allocator",
        "copy",
        "line",
        "damaged",
        "gap",
        "death",
    ] {
        assert!(
            judged(claim, Outcome::Right) > 0,
            "no recording's first sentence is right about {claim}"
        );
    }
    // Damaged copies of every format version the set holds.
    let versions: std::collections::BTreeSet<u8> = cases
        .iter()
        .filter(|c| c.set == "damaged")
        .map(|c| std::fs::read(tmp.path().join(&c.file)).unwrap()[8])
        .collect();
    assert_eq!(
        versions.into_iter().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5],
        "a damaged file of each format"
    );
}
