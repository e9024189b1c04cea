//! pprof's messages, with the field numbers of `profile.proto` (google/pprof,
//! `proto/profile.proto`), declared for prost's derive: only the fields
//! flatline writes.

use std::collections::HashMap;

use super::model::{Frame, Profile, SAMPLE_TYPES};

#[derive(Clone, PartialEq, prost::Message)]
pub struct PbProfile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<PbSample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Index 0 is always "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Indices into `string_table`.
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PbSample {
    /// Innermost first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// What pprof's tools would symbolize from; flatline's frames come named,
/// which `has_functions`, `has_filenames` and `has_line_numbers` say.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// The string table and the ids handed out so far.
#[derive(Default)]
struct Tables {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<Function>,
    function_ids: HashMap<(String, String), u64>,
    locations: Vec<Location>,
    location_ids: HashMap<Frame, u64>,
}

impl Tables {
    fn string(&mut self, s: &str) -> i64 {
        if self.strings.is_empty() {
            self.strings.push(String::new());
            self.string_ids.insert(String::new(), 0);
        }
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), i);
        i
    }

    fn function(&mut self, name: &str, file: &str) -> u64 {
        let key = (name.to_owned(), file.to_owned());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let (name, filename) = (self.string(name), self.string(file));
        self.functions.push(Function {
            id,
            name,
            system_name: name,
            filename,
        });
        self.function_ids.insert(key, id);
        id
    }

    /// A location per distinct frame (function, file and line).
    fn location(&mut self, f: &Frame) -> u64 {
        if let Some(&id) = self.location_ids.get(f) {
            return id;
        }
        let function_id = self.function(&f.function, &f.file);
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id: 1,
            line: vec![Line {
                function_id,
                line: f.line,
            }],
        });
        self.location_ids.insert(f.clone(), id);
        id
    }
}

/// `profile` as pprof's message.
pub fn build(profile: &Profile) -> PbProfile {
    let mut t = Tables::default();
    t.string("");
    let sample_type = SAMPLE_TYPES
        .iter()
        .map(|(ty, unit)| ValueType {
            r#type: t.string(ty),
            unit: t.string(unit),
        })
        .collect();
    let sample = profile
        .samples
        .iter()
        .map(|s| {
            let location_id = s.frames.iter().map(|f| t.location(f)).collect();
            let mut label: Vec<Label> = Vec::new();
            if let Some(pid) = s.pid {
                label.push(Label {
                    key: t.string("pid"),
                    str: 0,
                    num: i64::from(pid),
                });
            }
            for (k, v) in &s.labels {
                label.push(Label {
                    key: t.string(k),
                    str: t.string(v),
                    num: 0,
                });
            }
            PbSample {
                location_id,
                value: s.values.to_vec(),
                label,
            }
        })
        .collect();
    let period_type = Some(ValueType {
        r#type: t.string("space"),
        unit: t.string("bytes"),
    });
    let comment = profile.comments.iter().map(|c| t.string(c)).collect();
    let default_sample_type = t.string("inuse_space");
    let program = if profile.program.is_empty() {
        "flatline"
    } else {
        profile.program.as_str()
    };
    let mapping = vec![Mapping {
        id: 1,
        filename: t.string(program),
        has_functions: true,
        has_filenames: true,
        has_line_numbers: true,
    }];
    PbProfile {
        sample_type,
        sample,
        mapping,
        location: t.locations,
        function: t.functions,
        string_table: t.strings,
        time_nanos: profile.time_nanos,
        duration_nanos: profile.duration_nanos,
        period_type,
        period: profile.period,
        comment,
        default_sample_type,
    }
}
