//! A heap profile before encoding: what [`super::from_recording`] and a
//! live stream make, and what [`super::proto`] writes.

/// The four values of a sample, in Go's order.
pub const SAMPLE_TYPES: [(&str, &str); 4] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];

/// One frame of a stack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    pub function: String,
    pub file: String,
    /// 0 where not known.
    pub line: i64,
}

impl Frame {
    /// `leak_here sites_job.py:12`: the name a flame graph shows (the
    /// file by its name).
    pub fn label(&self) -> String {
        let base = self.file.rsplit('/').next().unwrap_or(&self.file);
        match (base.is_empty(), self.line) {
            (true, _) => self.function.clone(),
            (false, 0) => format!("{} {base}", self.function),
            (false, l) => format!("{} {base}:{l}", self.function),
        }
    }
}

/// One site's stack, its process and its four values.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Innermost first.
    pub frames: Vec<Frame>,
    pub pid: Option<u32>,
    /// `(key, value)` string labels: `process`, `role`, `rank`.
    pub labels: Vec<(String, String)>,
    /// In [`SAMPLE_TYPES`]' order.
    pub values: [i64; 4],
}

/// A heap profile before encoding.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    pub samples: Vec<Sample>,
    /// When it was taken (the end of its window), ns since the Unix epoch.
    pub time_nanos: i64,
    /// The window it covers.
    pub duration_nanos: i64,
    /// Bytes between two samples, on average (`--sites-every`), if known.
    pub period: i64,
    /// Said to a reader (`comment`): what it is and what it is not.
    pub comments: Vec<String>,
    /// The watched command's program (its first word), named as the
    /// profile's one mapping, which says its frames are already symbolized.
    pub program: String,
}
