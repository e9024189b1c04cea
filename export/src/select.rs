//! Options that pick channels by name (`report --channels`, the subject of
//! `--alert`): each must pick something, or the run stops before it starts
//! with exit 2 ([`crate::BadFlag`]) and the names that do exist. A gate
//! that selects nothing passes by not looking; that is what this refuses.
//!
//! Two kinds of check:
//! - against a recording ([`selects`]): its channels are known, so a
//!   list of globs must match at least one of them (a glob of the list that
//!   matches none is warned of);
//! - against a stream that has not started ([`could_name`]): its channels
//!   join as processes, GPUs and printed metrics appear, so a glob must
//!   match a name some source can make: one the catalog declares
//!   (`catalog/src/lib.rs`; a family's `#` is any number, as
//!   `pid#.rss` is `pid4121.rss`), or one in a namespace a job names itself
//!   ([`JOB_NAMESPACES`]: `log.<key>`, `torch.<stat>`, `progress.<unit>`).

use flatline_telemetry::catalog;

use crate::BadFlag;

/// Most names an error lists before it says how many more there are.
pub const LISTED: usize = 24;

/// Prefixes of the channels a watched job names itself (its printed and
/// logged keys, PyTorch's memory stats, its progress bars' counts): any
/// name under them can join a stream.
pub const JOB_NAMESPACES: [&str; 3] = ["log.", "torch.", "progress."];

/// `a, b, c` — or the first [`LISTED`] and "… and N more".
pub fn list<S: AsRef<str>>(names: &[S]) -> String {
    let shown: Vec<&str> = names.iter().take(LISTED).map(AsRef::as_ref).collect();
    match names.len().saturating_sub(LISTED) {
        0 => shown.join(", "),
        more => format!("{} … and {more} more", shown.join(", ")),
    }
}

/// `names` with those nearest to one of `patterns` first (the longest
/// shared start with a pattern's literal beginning), so that a list cut at
/// [`LISTED`] shows what a typo meant: `mem.rss` before `tree.pss` for
/// `mem.rs`.
pub fn nearest_first<'a>(names: &[&'a str], patterns: &[&str]) -> Vec<&'a str> {
    let near = |n: &str| {
        patterns
            .iter()
            .map(|p| {
                let lit = p.split(['*', '?', '[']).next().unwrap_or("");
                n.chars()
                    .zip(lit.chars())
                    .take_while(|(a, b)| a == b)
                    .count()
            })
            .max()
            .unwrap_or(0)
    };
    let mut out = names.to_vec();
    out.sort_by_key(|n| std::cmp::Reverse(near(n)));
    out
}

/// Checks that `globs` (given as `flag`, a list) select at least one of
/// `names`, which are `noun`s (`what`: "the recording has", say). None
/// selected is an error that lists `names`, those nearest the globs first;
/// otherwise the globs of the list that selected nothing are returned, for
/// a warning (a list shared by recordings of several kinds, `mem.rss,gpu*.used`
/// on a host without a GPU, is no error).
pub fn selects<'g>(
    flag: &str,
    globs: &'g [glob::Pattern],
    names: &[&str],
    noun: &str,
    what: &str,
) -> Result<Vec<&'g str>, BadFlag> {
    let empty: Vec<&str> = globs
        .iter()
        .filter(|g| !names.iter().any(|n| g.matches(n)))
        .map(glob::Pattern::as_str)
        .collect();
    if empty.len() < globs.len() || globs.is_empty() {
        return Ok(empty);
    }
    let quoted = empty
        .iter()
        .map(|g| format!("'{g}'"))
        .collect::<Vec<_>>()
        .join(",");
    Err(BadFlag(if names.is_empty() {
        format!("{flag} {quoted} selects no {noun}: {what} none")
    } else {
        format!(
            "{flag} {quoted} selects no {noun}; {what} {}: {}",
            names.len(),
            list(&nearest_first(names, &empty))
        )
    }))
}

/// Whether a channel named by the glob `pattern` can ever exist in a live
/// stream: it matches a name the catalog declares (a family's `#` standing
/// for any number), or a name in one of [`JOB_NAMESPACES`].
pub fn could_name(pattern: &str) -> bool {
    let Some(glob) = Glob::parse(pattern) else {
        return false;
    };
    let declared = catalog::CHANNELS
        .iter()
        .flat_map(|d| Name::declared(d.name));
    let job = JOB_NAMESPACES.iter().map(|ns| Name::namespace(ns));
    declared.chain(job).any(|name| glob.meets(&name))
}

/// What a live stream's channels can be called, for an error: the catalog's
/// names (`#`: a number) and the job's namespaces.
pub fn nameable() -> Vec<String> {
    catalog::CHANNELS
        .iter()
        .map(|d| d.name.to_owned())
        .chain(JOB_NAMESPACES.iter().map(|ns| format!("{ns}*")))
        .collect()
}

/// The error for an expression `expr` whose channel `pattern` no stream
/// can have.
pub fn no_such_channel(expr: &str, pattern: &str) -> String {
    let names = nameable();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    format!(
        "{expr:?}: '{pattern}' names no channel a stream can have; they are {} (`#`: a number): {}",
        names.len(),
        list(&nearest_first(&names, &[pattern]))
    )
}

/// One token of a glob, as the `glob` crate reads it.
#[derive(Debug, Clone, PartialEq)]
enum G {
    Char(char),
    Any,
    Star,
    /// `[...]`: ranges (a single char is a range of one), negated with `!`.
    Class(bool, Vec<(char, char)>),
}

/// A glob's tokens, to be met with a [`Name`].
#[derive(Debug)]
struct Glob(Vec<G>);

impl Glob {
    /// Reads `s` as `glob::Pattern` does (`?`, `*`, `**`, `[ab]`, `[a-z]`,
    /// `[!a]`, `[?]` for a literal); `None` where it is not a glob.
    fn parse(s: &str) -> Option<Self> {
        glob::Pattern::new(s).ok()?;
        let c: Vec<char> = s.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < c.len() {
            match c[i] {
                '?' => out.push(G::Any),
                '*' => {
                    if out.last() != Some(&G::Star) {
                        out.push(G::Star);
                    }
                }
                '[' => {
                    let neg = c.get(i + 1) == Some(&'!');
                    let mut j = i + 1 + usize::from(neg);
                    let mut items = Vec::new();
                    // A `]` right after the opening is a member.
                    let mut first = true;
                    while j < c.len() && (c[j] != ']' || first) {
                        first = false;
                        if c.get(j + 1) == Some(&'-') && c.get(j + 2).is_some_and(|&e| e != ']') {
                            items.push((c[j], c[j + 2]));
                            j += 3;
                        } else {
                            items.push((c[j], c[j]));
                            j += 1;
                        }
                    }
                    out.push(G::Class(neg, items));
                    i = j;
                }
                ch => out.push(G::Char(ch)),
            }
            i += 1;
        }
        Some(Self(out))
    }

    /// Whether some string matches both this glob and `name`: a search over
    /// pairs of positions (each token of either side is one state).
    fn meets(&self, name: &Name) -> bool {
        let (g, n) = (&self.0, &name.0);
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![(0usize, 0usize)];
        while let Some((i, j)) = todo.pop() {
            if !seen.insert((i, j)) {
                continue;
            }
            if i == g.len() && j == n.len() {
                return true;
            }
            // A star or a rest may match nothing.
            if g.get(i) == Some(&G::Star) {
                todo.push((i + 1, j));
            }
            if matches!(n.get(j), Some(N::Rest)) {
                todo.push((i, j + 1));
            }
            let (Some(gt), Some(nt)) = (g.get(i), n.get(j)) else {
                continue;
            };
            // One character that both tokens take.
            let candidates: Vec<char> = match nt {
                N::Char(c) => vec![*c],
                N::Number => ('0'..='9').collect(),
                N::Rest => match gt {
                    G::Char(c) => vec![*c],
                    G::Class(false, items) => items.iter().map(|r| r.0).collect(),
                    // Any character not named: one the glob's others are not.
                    _ => ('!'..='~').collect(),
                },
            };
            let Some(_) = candidates.into_iter().find(|&c| gt.takes(c) && nt.takes(c)) else {
                continue;
            };
            let gi = if *gt == G::Star { i } else { i + 1 };
            match nt {
                // A number is one or more of its characters: stay, or end.
                N::Number => {
                    todo.push((gi, j));
                    todo.push((gi, j + 1));
                }
                N::Rest => todo.push((gi, j)),
                N::Char(_) => todo.push((gi, j + 1)),
            }
        }
        false
    }
}

impl G {
    fn takes(&self, c: char) -> bool {
        match self {
            G::Char(x) => *x == c,
            G::Any | G::Star => true,
            G::Class(neg, items) => items.iter().any(|&(a, b)| (a..=b).contains(&c)) != *neg,
        }
    }
}

/// One token of a name a stream can have.
#[derive(Debug, Clone, PartialEq)]
enum N {
    Char(char),
    /// One or more digits (a family's `#`).
    Number,
    /// Anything at all (a job's own key).
    Rest,
}

impl N {
    fn takes(&self, c: char) -> bool {
        match self {
            N::Char(x) => *x == c,
            N::Number => c.is_ascii_digit(),
            N::Rest => true,
        }
    }
}

#[derive(Debug)]
struct Name(Vec<N>);

impl Name {
    /// A declared name; a family's `#` is a number, or two joined by `-`
    /// (`gpu0-2.used`: the device once it answered again after it was lost).
    fn declared(name: &str) -> Vec<Self> {
        let with = |number: &[N]| {
            Self(
                name.chars()
                    .flat_map(|c| match c {
                        '#' => number.to_vec(),
                        c => vec![N::Char(c)],
                    })
                    .collect(),
            )
        };
        if name.contains('#') {
            vec![
                with(&[N::Number]),
                with(&[N::Number, N::Char('-'), N::Number]),
            ]
        } else {
            vec![with(&[])]
        }
    }

    fn namespace(prefix: &str) -> Self {
        Self(prefix.chars().map(N::Char).chain([N::Rest]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_that_can_name_a_channel_is_taken() {
        for ok in [
            "mem.rss",
            "mem.rs*",
            "mem.rs?",
            "*",
            "tree.*",
            "pid*.pss",
            "pid4121.rss",
            "pid41?1.rss",
            "pid[0-9]*.vram",
            "gpu[01].used",
            "gpu0-2.used",
            "gpu?.used",
            "*.used",
            "log.loss",
            "log.rank1.loss",
            "torch.cache",
            "progress.it_per_s",
            "site12.live",
            "[lm]og.x",
            "l*s",
        ] {
            assert!(could_name(ok), "{ok} was refused");
        }
    }

    #[test]
    fn a_glob_no_channel_can_have_is_refused() {
        for bad in [
            "mem.rs",
            "mem.rsss",
            "memrss",
            "pid.rss",
            "pidx.rss",
            "pid12.rs",
            "gpu[!0-9].used",
            "gpu0.fan",
            "tree.pss ",
            "lg.loss",
            "[!lmtpgacswi]*",
            "pid[",
        ] {
            assert!(!could_name(bad), "{bad} was taken");
        }
    }

    #[test]
    fn a_recordings_selector_selects_something() {
        let globs = |s: &[&str]| -> Vec<glob::Pattern> {
            s.iter().map(|g| glob::Pattern::new(g).unwrap()).collect()
        };
        let names = ["tree.pss", "mem.rss", "mem.pss"];
        let sel = |g: &[&str], names: &[&str]| {
            selects("--channels", &globs(g), names, "channel", "it has")
                .map(|v| v.into_iter().map(str::to_owned).collect::<Vec<_>>())
                .map_err(|e| e.to_string())
        };
        assert_eq!(sel(&["mem.*"], &names), Ok(vec![]));
        assert_eq!(
            sel(&["tree.*", "mem.rs"], &names),
            Ok(vec!["mem.rs".into()])
        );
        assert_eq!(
            sel(&["mem.rs"], &names),
            Err(
                "--channels 'mem.rs' selects no channel; it has 3: mem.rss, mem.pss, tree.pss"
                    .into()
            ),
            "nearest first"
        );
        assert_eq!(
            sel(&["a", "b"], &names).unwrap_err(),
            "--channels 'a','b' selects no channel; it has 3: tree.pss, mem.rss, mem.pss"
        );
        let many: Vec<String> = (0..100).map(|i| format!("c{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = sel(&["x"], &many).unwrap_err();
        assert!(e.ends_with("c23 … and 76 more"), "{e}");
        assert!(!e.contains("c24"), "{e}");
    }
}
