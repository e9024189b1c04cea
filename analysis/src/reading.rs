//! The one reading of a stream's channels: every step that turns a
//! channel's readings into the analysis a surface lays out, in one place.
//!
//! A stream is answered once per change of what it holds, in one of three
//! places, and every surface reads what they hold: a recording, or a
//! window's readings read whole or in part, by [`Run`] (the receipt, a
//! replay's banner, a selection's receipt); a window's live analyses by
//! [`answer_live`] (the live banner, cards and processes panel); a stream
//! with no window by [`super::run::LiveRun`] (the exporter, its Prometheus
//! series, OTLP and alerts). Each reads the channels ([`read_input`], or
//! [`super::LiveAnalysis`], which re-reads each channel through [`reread`]),
//! then the process tree, how the job ended and its allocation sites
//! ([`Facts`]), then the one [`summary::Answer`]. The steps are
//! `pub(crate)`, so the compiler fails any surface that calls them; where a
//! step is a method or a name the compiler cannot hide,
//! `scripts/check-layers.py` fails instead.
//!
//! The steps, in their order:
//! 1. the job's teardown is cut ([`super::tree::analysis_end`]);
//! 2. the start-up is found ([`super::recording_warmup`]) or given;
//! 3. each channel is analysed as its kind ([`super::analyze`]);
//! 4. a PSS or USS copying under a still RSS is bounded by it
//!    ([`super::bound_copy`]);
//! 5. a job that ended during its start-up tells no growth
//!    ([`super::in_start_up`]), nor does a start-up's tail
//!    ([`super::settling`]);
//! 6. a PSS is read beside its USS ([`super::reconcile_pss`]), and a
//!    tree's sum beside the processes it adds up ([`super::sum_of_parts`]);
//! 7. the tree, the deaths and the sites are read ([`Facts::read`]).

use super::death::{self, Ending};
use super::rules::{self, LimitSource};
use super::sites::{self, Site};
use super::summary::{self, Assessed};
use super::tree::{self, Columns, TreeSummary};
use super::{ChannelAnalysis, Context};
use flatline_format::{Event, HostFacts, Recording};
use flatline_format::{Schema, TOKEN_CHANNELS};

/// How the start-up's end (the start-up the analysis skips) was chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum WarmupChoice {
    /// `--warmup-s`.
    Given(f64),
    /// Found where start-up ends in a memory channel.
    Found { s: f64, channel: String },
    /// No start-up found: every reading is analysed.
    None,
}

impl WarmupChoice {
    /// Seconds from the first reading (0: none).
    pub fn seconds(&self) -> f64 {
        match self {
            WarmupChoice::Given(s) | WarmupChoice::Found { s, .. } => *s,
            WarmupChoice::None => 0.0,
        }
    }
}

/// One channel as read: its analysis and what bounds it.
#[derive(Debug, Clone)]
pub struct Read {
    /// Its position in the schema.
    pub index: usize,
    pub analysis: ChannelAnalysis,
    /// What bounds the channel, where something does.
    pub limit: Option<LimitSource>,
}

impl Read {
    /// The channel as the assessment takes it.
    pub fn assessed<'a>(&'a self, schema: &'a Schema) -> Assessed<'a> {
        let spec = &schema.channels[self.index];
        Assessed {
            name: &spec.name,
            unit: spec.unit,
            analysis: &self.analysis,
            limit: self.limit,
        }
    }
}

/// A recording read whole or in part.
#[derive(Debug)]
pub struct Reading {
    /// Every channel, most urgent first ([`summary::order`]).
    pub channels: Vec<Read>,
    pub warmup: WarmupChoice,
    /// The samples analysed (`a..b`, the teardown cut).
    pub samples: std::ops::Range<usize>,
    /// Where the job's teardown began (seconds since the start).
    pub teardown_s: Option<f64>,
}

/// A stream's readings as [`read_input`] takes them: a recording's, or
/// what a window holds of a live stream or a replay.
pub struct Input<'s, C: Fn(usize) -> &'s [f64]> {
    pub schema: &'s Schema,
    pub events: &'s [Event],
    pub host: &'s HostFacts,
    /// The watch launched the job (its setup has a `command`).
    pub launched: bool,
    /// The watched process (its pid), where one was.
    pub root: Option<u32>,
    /// The job's rank, where its labels say.
    pub rank: Option<&'s str>,
    /// Each reading's time, seconds.
    pub t: &'s [f64],
    /// Channel `i`'s readings, aligned with `t` (`NaN`: none).
    pub column: C,
}

impl<'s, C: Fn(usize) -> &'s [f64]> Input<'s, C> {
    fn channel(&self, name: &str) -> Option<&'s [f64]> {
        self.schema.index_of(name).map(&self.column)
    }
}

impl<'s, C: Fn(usize) -> &'s [f64]> std::fmt::Debug for Input<'s, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("channels", &self.schema.len())
            .field("samples", &self.t.len())
            .finish_non_exhaustive()
    }
}

impl Reading {
    /// Every channel as the assessment takes it, most urgent first.
    pub fn assessed<'a>(&'a self, schema: &'a Schema) -> Vec<Assessed<'a>> {
        self.channels.iter().map(|r| r.assessed(schema)).collect()
    }

    /// Channel `i`'s analysis by its position in the schema (`n`
    /// channels), for [`Facts::read`].
    pub fn by_index(&self, n: usize) -> Vec<Option<&ChannelAnalysis>> {
        let mut out = vec![None; n];
        for r in &self.channels {
            out[r.index] = Some(&r.analysis);
        }
        out
    }
}

/// What a surface words of the numbers in an answer: a value in its unit,
/// and a duration in seconds.
#[derive(Clone, Copy)]
pub struct Words<'w> {
    pub value: &'w dyn Fn(f64, flatline_format::Unit) -> String,
    pub duration: &'w dyn Fn(f64) -> String,
}

impl std::fmt::Debug for Words<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Words")
    }
}

/// A stream read whole or in part: its channels' reading, the facts beside
/// them and the one answer, each made once. The receipt and the window's
/// replays and selections hold one; none of them calls the steps.
#[derive(Debug)]
pub struct Run {
    pub reading: Reading,
    pub facts: Facts,
    pub answer: summary::Answer,
}

impl Run {
    /// Reads a recording as [`read_input`] reads a stream, and answers it; `lost` says what
    /// the file lost and what write faults left out of the samples read
    /// (`a..b`, seconds since the start).
    pub fn read(
        rec: &Recording,
        warmup_s: Option<f64>,
        range: Option<[f64; 2]>,
        prefix: bool,
        lost: impl FnOnce(Option<[f64; 2]>) -> Lost,
        words: Words<'_>,
    ) -> Self {
        let t: Vec<f64> = rec.t_ns.iter().map(|&t| t as f64 / 1e9).collect();
        let input = Input {
            schema: &rec.header.schema,
            events: &rec.events,
            host: &rec.header.host,
            launched: rec.header.config.contains_key("command"),
            root: rec.header.config.get("pid").and_then(|p| p.parse().ok()),
            rank: rec.header.labels.get("rank").map(String::as_str),
            t: &t,
            column: |i: usize| rec.columns[i].as_slice(),
        };
        Self::read_input(&input, warmup_s, range, prefix, lost, words)
    }

    /// [`Run::read`] on any stream's readings (a window's, a replay's).
    pub fn read_input<'s, C: Fn(usize) -> &'s [f64]>(
        input: &Input<'s, C>,
        warmup_s: Option<f64>,
        range: Option<[f64; 2]>,
        prefix: bool,
        lost: impl FnOnce(Option<[f64; 2]>) -> Lost,
        words: Words<'_>,
    ) -> Self {
        let reading = read_input(input, warmup_s, range, prefix);
        let by_index = reading.by_index(input.schema.len());
        let part = reading.samples.clone();
        let facts = Facts::of(input, part.clone(), |i| by_index[i]);
        let t0 = input.t.first().copied().unwrap_or(0.0);
        let within = range.map(
            |_| match (input.t[part.clone()].first(), input.t[part].last()) {
                (Some(&f), Some(&l)) => [f - t0, l - t0],
                _ => [0.0, 0.0],
            },
        );
        let lost = lost(within);
        let answer = summary::Answer::of(
            &reading.assessed(input.schema),
            &facts.known(&lost),
            words.value,
            words.duration,
        );
        Run {
            reading,
            facts,
            answer,
        }
    }
}

/// A live stream's facts and answer, made together from its readings
/// (`input`, of which the first `end` are analysed: the teardown cut) and
/// each channel's live analysis and limit (`None`: not analysed yet).
pub fn answer_live<'s, 'a, C: Fn(usize) -> &'s [f64]>(
    input: &Input<'s, C>,
    end: usize,
    analysis: impl Fn(usize) -> Option<(&'a ChannelAnalysis, Option<LimitSource>)>,
    lost: &Lost,
    words: Words<'_>,
) -> (Facts, summary::Answer) {
    let facts = Facts::of(input, 0..end, |i| analysis(i).map(|a| a.0));
    let rows: Vec<Assessed<'_>> = (0..input.schema.len())
        .filter_map(|i| {
            let (a, limit) = analysis(i)?;
            let spec = &input.schema.channels[i];
            Some(Assessed {
                name: &spec.name,
                unit: spec.unit,
                analysis: a,
                limit,
            })
        })
        .collect();
    let answer = summary::Answer::of(&rows, &facts.known(lost), words.value, words.duration);
    (facts, answer)
}

/// Reads a stream's channels: the samples from `range[0]` to `range[1]`
/// seconds after the start (all: `None`), after the start-up `warmup_s`
/// (else the one found on all of it). A `prefix` is read as a live
/// analysis would have read the run had it ended there: its start-up found
/// on those seconds alone, its teardown not cut.
pub(crate) fn read_input<'s, C: Fn(usize) -> &'s [f64]>(
    input: &Input<'s, C>,
    warmup_s: Option<f64>,
    range: Option<[f64; 2]>,
    prefix: bool,
) -> Reading {
    let t_all = input.t;
    let t0 = t_all.first().copied().unwrap_or(0.0);
    let (a, b) = match range {
        Some([from, to]) => (
            t_all.partition_point(|&t| t - t0 < from),
            t_all.partition_point(|&t| t - t0 <= to),
        ),
        None => (0, t_all.len()),
    };
    // A job's teardown (its processes exiting at the end) is no part of how
    // it ran: the analysis ends where it began.
    let names = input.schema.channels.iter().map(|c| c.name.as_str());
    let teardown = tree::analysis_end(input.events, t_all, names, |n| input.channel(n))
        .filter(|&td| td > t0 && !prefix);
    let b = match teardown {
        Some(td) => b.min(t_all.partition_point(|&t| t < td)),
        None => b,
    };
    let b = b.max(a);
    let t = &t_all[a..b];
    let column = |i: usize| &(input.column)(i)[a..b];
    // What the start-up and the step axis are found on: the whole recording,
    // or (a prefix) only what was there by its end.
    let seen = if prefix { b } else { t_all.len() };
    let whole = |i: usize| &(input.column)(i)[..seen];
    let steps = rules::step_axis(input.schema, whole).map(column);
    // Tokens follow the same rule: a count that never moves is no axis.
    let tokens = TOKEN_CHANNELS
        .iter()
        .find_map(|n| input.channel(n))
        .filter(|c| rules::advances(c))
        .map(|c| &c[a..b]);
    let warmup = match warmup_s {
        Some(s) => WarmupChoice::Given(s),
        None => match super::recording_warmup(input.schema, &t_all[..seen], whole) {
            Some(w) => WarmupChoice::Found {
                s: w.at_s - t0,
                channel: w.channel.unwrap_or_default(),
            },
            None => WarmupChoice::None,
        },
    };
    // The start-up's end, on the part's own clock (0: the part starts after it).
    let part_warmup = t
        .first()
        .map_or(0.0, |&first| (t0 + warmup.seconds() - first).max(0.0));
    let schema = input.schema;
    // The ceiling each channel cannot pass, where the recording knows it.
    let limits: Vec<Option<(f64, LimitSource)>> = schema
        .channels
        .iter()
        .map(|spec| {
            rules::limit_for(&spec.name, spec.unit, input.host, |c| {
                rules::latest(input.channel(c)?)
            })
        })
        .collect();
    let raw: Vec<ChannelAnalysis> = schema
        .channels
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let limit = limits[i];
            let ctx = Context {
                kind: spec.kind,
                warmup_s: Some(part_warmup),
                steps,
                tokens,
                limit: limit.map(|l| l.0),
                min_growth: rules::evidence_floor(&spec.name, spec.unit),
            };
            super::analyze(t, column(i), &ctx)
        })
        .collect();
    // A job watched from its launch that ended in less time than a start-up
    // can take: its whole life may be its start-up. A prefix (a live
    // window, a replay's playhead) knows of the exit only once its readings
    // reach it.
    let seen_until = prefix.then(|| t_all[..b].last().copied()).flatten();
    let start_up_only =
        range.is_none() && ended_in_start_up(input, &t_all[..b], &warmup, seen_until);
    let found = match &warmup {
        WarmupChoice::Found { s, .. } => Some(t0 + s),
        _ => None,
    };
    let mut read: Vec<Read> = schema
        .channels
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let rss = super::rss_of(&spec.name)
                .and_then(|r| schema.index_of(&r))
                .map(|j| &raw[j]);
            // Growth soon after a found start-up, still small beside what
            // the start-up rose, may be its tail; a start-up given by hand
            // is the user's word that the start-up ended.
            let rise = found.and_then(|cut| super::start_up_rise(&t_all[..seen], whole(i), cut));
            let (analysis, copied) = reread(raw[i].clone(), rss, start_up_only, rise);
            Read {
                index: i,
                analysis,
                limit: if copied {
                    Some(LimitSource::Shared)
                } else {
                    limits[i].map(|l| l.1)
                },
            }
        })
        .collect();
    let order = summary::order(&read.iter().map(|r| r.assessed(schema)).collect::<Vec<_>>());
    // A PSS that rose while its USS did not is shared pages changing hands.
    for i in 0..read.len() {
        let uss = super::uss_of(&schema.channels[i].name).and_then(|u| schema.index_of(&u));
        if let Some(j) = uss {
            let u = read[j].analysis.clone();
            super::reconcile_pss(&mut read[i].analysis, &u);
        }
    }
    // A tree's sum is read beside the processes it adds up.
    for i in 0..read.len() {
        let names = schema.channels.iter().map(|c| c.name.as_str());
        if let Some(parts) = super::parts_of(&schema.channels[i].name, names) {
            let parts: Vec<ChannelAnalysis> =
                parts.iter().map(|&j| read[j].analysis.clone()).collect();
            let parts: Vec<&ChannelAnalysis> = parts.iter().collect();
            super::sum_of_parts(&mut read[i].analysis, &parts);
        }
    }
    let mut slots: Vec<Option<Read>> = read.into_iter().map(Some).collect();
    Reading {
        channels: order.into_iter().filter_map(|i| slots[i].take()).collect(),
        warmup,
        samples: a..b,
        teardown_s: teardown.map(|td| td - t0),
    }
}

/// Re-reads one channel's analysis as every surface reads it: a PSS or
/// USS growing under a still RSS (`rss`: that RSS's analysis, as analysed)
/// bounded by it; growth told as a start-up where the job ended during its
/// start-up (`start_up_only`), or as its tail where it is still small
/// beside what the start-up rose (`rise`). True where the copy bound
/// applies. (A PSS is then read beside its USS: [`super::reconcile_pss`].)
pub fn reread(
    mut a: ChannelAnalysis,
    rss: Option<&ChannelAnalysis>,
    start_up_only: bool,
    rise: Option<f64>,
) -> (ChannelAnalysis, bool) {
    let copied = rss.is_some_and(|r| super::bound_copy(&mut a, r));
    if start_up_only {
        super::in_start_up(&mut a, copied);
    }
    if let Some(rise) = rise {
        super::settling(&mut a, rise, copied);
    }
    (a, copied)
}

/// The job was launched by the watch (its `command`) and exited by itself
/// within [`super::START_UP_ONLY_S`] of its first reading (`t`: the
/// readings' times). Nothing in so short a life tells a leak from a
/// start-up: an import slows as it ends, and then building the model and
/// its first steps climb steeply again just before the exit (a real
/// PyTorch job under load: 480 to 675 MiB over 17 s of imports, flat, then
/// 675 to 763 MiB in its last 1.3 s); a dataset read into memory climbs at
/// a steady pace like a leak. A found start-up is no proof the start-up
/// ended (that import settled for a second at 5 s), so only a start-up given
/// by hand (`--warmup-s`, the user's word that it ended there) keeps the
/// verdicts as they are.
///
/// `seen_until`: for a prefix, the time of its last reading; an exit more
/// than a second after it (the sampler's grace after an exit) is still to
/// come.
fn ended_in_start_up<'s, C: Fn(usize) -> &'s [f64]>(
    input: &Input<'s, C>,
    t: &[f64],
    warmup: &WarmupChoice,
    seen_until: Option<f64>,
) -> bool {
    let Some(&t0) = t.first() else {
        return false;
    };
    let ended = input.events.iter().any(|e| {
        super::exit_in_start_up(e, t0) && seen_until.is_none_or(|s| e.t_ns as f64 / 1e9 <= s + 1.0)
    });
    input.launched && ended && !matches!(warmup, WarmupChoice::Given(_))
}

/// What is known of a stream beside its channels' analyses: its process
/// tree, how the job ended and the allocation sites, read the same way
/// for a recording and a live window.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The watched process tree over the part analysed.
    pub tree: Option<TreeSummary>,
    /// How the job ended (deaths, printed out-of-memory errors), over the
    /// whole stream.
    pub ending: Ending,
    /// The allocation sites (`watch --sites`), largest growth first.
    pub sites: Vec<Site>,
    /// Whether the stream has allocation-site channels at all.
    pub sites_sampled: bool,
    /// Why sites asked for were not sampled, where the watch said
    /// ([`SITES_REFUSED`]).
    pub sites_refused: Option<String>,
    /// The job's rank, where its labels say.
    pub rank: Option<String>,
}

/// The start of the note a watch leaves where `--sites` was asked for and
/// could not be had (a running process, a static program): the receipt
/// then says why, rather than tell its reader to ask for them.
pub const SITES_REFUSED: &str = "--sites: ";

/// A stream as [`Facts::read`] reads it.
pub(crate) struct Stream<'s, FP, FW>
where
    FP: Fn(&str) -> Option<&'s [f64]>,
    FW: Fn(&str) -> Option<&'s [f64]>,
{
    pub schema: &'s Schema,
    pub events: &'s [Event],
    pub host: &'s HostFacts,
    /// The watched process (its pid), where one was.
    pub root: Option<u32>,
    pub rank: Option<&'s str>,
    /// The part analysed (the teardown cut, a range).
    pub part: Columns<'s, FP>,
    /// Every reading (deaths are read over the whole stream).
    pub whole: Columns<'s, FW>,
}

impl<'s, FP, FW> std::fmt::Debug for Stream<'s, FP, FW>
where
    FP: Fn(&str) -> Option<&'s [f64]>,
    FW: Fn(&str) -> Option<&'s [f64]>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("channels", &self.schema.len())
            .field("events", &self.events.len())
            .field("part", &self.part)
            .field("whole", &self.whole)
            .finish_non_exhaustive()
    }
}

impl Facts {
    /// Reads the tree, the deaths and the sites of `input`, whose channel
    /// `i` was analysed as `analysis(i)` (`None`: not yet), over the
    /// readings `part` (the tree and the sites; deaths over all of them).
    /// A column shorter than the times is read as far as it goes.
    pub(crate) fn of<'s, 'a, C: Fn(usize) -> &'s [f64]>(
        input: &Input<'s, C>,
        part: std::ops::Range<usize>,
        analysis: impl Fn(usize) -> Option<&'a ChannelAnalysis>,
    ) -> Self {
        let t = input.t;
        let n = t.len();
        let (a, b) = (part.start.min(n), part.end.min(n));
        let cut = |from: usize, to: usize| {
            move |c: &str| {
                let v = (input.column)(input.schema.index_of(c)?);
                Some(&v[from.min(v.len())..to.min(v.len())])
            }
        };
        let stream = Stream {
            schema: input.schema,
            events: input.events,
            host: input.host,
            root: input.root,
            rank: input.rank,
            part: Columns {
                t: &t[a..b],
                column: cut(a, b),
            },
            whole: Columns {
                t,
                column: cut(0, n),
            },
        };
        Self::read(&stream, analysis)
    }

    /// Reads the tree, the deaths and the sites of `stream`, whose channel
    /// `i` was analysed as `analysis(i)` (`None`: not yet).
    pub(crate) fn read<'s, 'a, FP, FW>(
        stream: &Stream<'s, FP, FW>,
        analysis: impl Fn(usize) -> Option<&'a ChannelAnalysis>,
    ) -> Self
    where
        FP: Fn(&str) -> Option<&'s [f64]>,
        FW: Fn(&str) -> Option<&'s [f64]>,
    {
        let schema = stream.schema;
        let by_name = |n: &str| schema.index_of(n).and_then(&analysis);
        let tree = tree::summarize(schema, stream.events, by_name, &stream.part);
        let ending = death::read(
            schema,
            stream.events,
            stream.host,
            &stream.whole,
            stream.root,
        );
        let channels: Vec<sites::SiteChannel<'_>> = (0..schema.len())
            .filter(|&i| rules::is_site_channel(&schema.channels[i].name))
            .filter_map(|i| {
                let name = &schema.channels[i].name;
                Some(sites::SiteChannel {
                    name,
                    labels: &schema.channels[i].labels,
                    analysis: analysis(i)?,
                    // What it holds at the part's end: its last reading.
                    last: (stream.part.column)(name)
                        .and_then(rules::latest)
                        .unwrap_or(f64::NAN),
                })
            })
            .collect();
        Facts {
            tree,
            ending,
            sites: sites::sites(&channels),
            sites_sampled: schema
                .channels
                .iter()
                .any(|c| rules::samples_sites(&c.name)),
            sites_refused: stream.events.iter().find_map(|e| match &e.kind {
                flatline_format::EventKind::Note(n) => n
                    .strip_prefix(SITES_REFUSED)
                    .map(|why| why.split("; watching").next().unwrap_or(why).to_owned()),
                _ => None,
            }),
            rank: stream.rank.map(str::to_owned),
        }
    }

    /// What the assessment is told besides the channels: `lost` is what
    /// the file lost to damage and what write faults left out of it.
    pub(crate) fn known<'a>(&'a self, lost: &'a Lost) -> summary::Known<'a> {
        summary::Known {
            tree: self.tree.as_ref(),
            ending: Some(&self.ending),
            sites: &self.sites,
            sites_sampled: self.sites_sampled,
            sites_refused: self.sites_refused.as_deref(),
            rank: self.rank.as_deref(),
            damage: lost.damage.as_ref(),
            gap: lost.gap.as_ref(),
        }
    }
}

/// What a stream lost, as its surface words it: damage to its file and the
/// gaps write faults left in it.
#[derive(Debug, Clone, Default)]
pub struct Lost {
    pub damage: Option<summary::DamageNote>,
    pub gap: Option<summary::DamageNote>,
}
