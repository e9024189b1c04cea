//! The few messages of Perfetto's trace format that `export --perfetto`
//! writes, declared by hand with prost's derive: no protoc, no build script,
//! no copy of Perfetto's protos in the tree. Only the fields flatline uses
//! are declared; the field numbers are Perfetto's, and each message names
//! the file of Perfetto's repository (`protos/perfetto/…`) it comes from.
//!
//! Perfetto's protos are proto2: a repeated number is *not* packed unless
//! the .proto says so, and Perfetto's own decoder (protozero) reads such a
//! field only unpacked, so every repeated number here says
//! `packed = "false"`. Scalars are `Option`s, as proto2 fields have
//! presence: a field set to 0 is written, one left `None` is not.

/// protos/perfetto/trace/trace.proto: the file is a `Trace`, its packets
/// one after another.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// protos/perfetto/trace/trace_packet.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// A `BuiltinClock` (protos/perfetto/common/builtin_clock.proto).
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// `oneof optional_trusted_packet_sequence_id`, one member.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// `SequenceFlags` bits ([`SEQ_INCREMENTAL_STATE_CLEARED`]).
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(oneof = "Data", tags = "6, 11, 37, 60")]
    pub data: Option<Data>,
}

/// `TracePacket`'s `oneof data`, the members flatline writes.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Data {
    #[prost(message, tag = "6")]
    ClockSnapshot(ClockSnapshot),
    #[prost(message, tag = "11")]
    TrackEvent(TrackEvent),
    #[prost(message, tag = "37")]
    ProfilePacket(ProfilePacket),
    #[prost(message, tag = "60")]
    TrackDescriptor(TrackDescriptor),
}

/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`
/// (protos/perfetto/trace/trace_packet.proto).
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;

/// `BuiltinClock` values (protos/perfetto/common/builtin_clock.proto).
pub const CLOCK_REALTIME: u32 = 1;
pub const CLOCK_MONOTONIC_COARSE: u32 = 4;
pub const CLOCK_BOOTTIME: u32 = 6;

/// protos/perfetto/trace/clock_snapshot.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
    /// A `BuiltinClock`: the clock the trace's timeline is in.
    #[prost(int32, optional, tag = "2")]
    pub primary_trace_clock: Option<i32>,
}

/// `ClockSnapshot.Clock` (protos/perfetto/trace/clock_snapshot.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Clock {
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
}

/// protos/perfetto/trace/track_event/track_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// `oneof static_or_dynamic_name`, the plain `name` member.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    #[prost(string, optional, tag = "14")]
    pub description: Option<String>,
}

/// protos/perfetto/trace/track_event/process_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
    #[prost(string, repeated, tag = "8")]
    pub process_labels: Vec<String>,
}

/// protos/perfetto/trace/track_event/counter_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {
    /// A `CounterDescriptor.Unit` ([`UNIT_SIZE_BYTES`], …).
    #[prost(int32, optional, tag = "3")]
    pub unit: Option<i32>,
    /// Values are multiplied by it on import (MiB columns: 2^20).
    #[prost(int64, optional, tag = "4")]
    pub unit_multiplier: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
}

/// `CounterDescriptor.Unit` values
/// (protos/perfetto/trace/track_event/counter_descriptor.proto).
pub const UNIT_TIME_NS: i32 = 1;
pub const UNIT_COUNT: i32 = 2;
pub const UNIT_SIZE_BYTES: i32 = 3;

/// protos/perfetto/trace/track_event/track_event.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// A `TrackEvent.Type` ([`TYPE_SLICE_BEGIN`], …).
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// `oneof name_field`, the plain `name` member (no interning).
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// `oneof counter_value_field`, the `double_counter_value` member.
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
}

/// `TrackEvent.Type` values
/// (protos/perfetto/trace/track_event/track_event.proto).
pub const TYPE_SLICE_BEGIN: i32 = 1;
pub const TYPE_SLICE_END: i32 = 2;
pub const TYPE_INSTANT: i32 = 3;
pub const TYPE_COUNTER: i32 = 4;

/// protos/perfetto/trace/track_event/debug_annotation.proto: a named
/// argument of an event, shown in the UI's details of a slice.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    #[prost(oneof = "AnnotationValue", tags = "4, 5, 6")]
    pub value: Option<AnnotationValue>,
    /// `oneof name_field`, the plain `name` member.
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

/// `DebugAnnotation`'s `oneof value`, the members flatline writes.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AnnotationValue {
    #[prost(int64, tag = "4")]
    Int(i64),
    #[prost(double, tag = "5")]
    Double(f64),
    #[prost(string, tag = "6")]
    Text(String),
}

/// protos/perfetto/trace/profiling/profile_packet.proto: one heap dump of
/// one or more processes, with the strings, mappings, frames and callstacks
/// it refers to (the tables inside the packet, which trace processor reads
/// before looking in `InternedData`; they hold for this packet only).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfilePacket {
    #[prost(message, repeated, tag = "1")]
    pub strings: Vec<InternedString>,
    #[prost(message, repeated, tag = "2")]
    pub frames: Vec<Frame>,
    #[prost(message, repeated, tag = "3")]
    pub callstacks: Vec<Callstack>,
    #[prost(message, repeated, tag = "4")]
    pub mappings: Vec<Mapping>,
    #[prost(message, repeated, tag = "5")]
    pub process_dumps: Vec<ProcessHeapSamples>,
    /// More packets of the same dump follow (never: each dump is one packet).
    #[prost(bool, optional, tag = "6")]
    pub continued: Option<bool>,
    /// 0, 1, 2, … on the sequence: a gap reads as a lost packet.
    #[prost(uint64, optional, tag = "7")]
    pub index: Option<u64>,
}

/// `ProfilePacket.HeapSample` (protos/perfetto/trace/profiling/profile_packet.proto):
/// one callstack's totals since the process started, which only grow.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeapSample {
    #[prost(uint64, optional, tag = "1")]
    pub callstack_id: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    pub self_allocated: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub self_freed: Option<u64>,
    #[prost(uint64, optional, tag = "5")]
    pub alloc_count: Option<u64>,
    #[prost(uint64, optional, tag = "6")]
    pub free_count: Option<u64>,
}

/// `ProfilePacket.ProcessHeapSamples`
/// (protos/perfetto/trace/profiling/profile_packet.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessHeapSamples {
    #[prost(uint64, optional, tag = "1")]
    pub pid: Option<u64>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<HeapSample>,
    /// When the dump was taken, on `BUILTIN_CLOCK_MONOTONIC_COARSE` (the
    /// clock trace processor reads it in).
    #[prost(uint64, optional, tag = "9")]
    pub timestamp: Option<u64>,
    #[prost(string, optional, tag = "11")]
    pub heap_name: Option<String>,
}

/// protos/perfetto/trace/profiling/profile_common.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

/// protos/perfetto/trace/profiling/profile_common.proto: flatline's
/// mappings are source files (a frame's `rel_pc` is its line).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// An `InternedString` id (of the empty string: no build id).
    #[prost(uint64, optional, tag = "2")]
    pub build_id: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub start: Option<u64>,
    #[prost(uint64, optional, tag = "5")]
    pub end: Option<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "7")]
    pub path_string_ids: Vec<u64>,
}

/// protos/perfetto/trace/profiling/profile_common.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct Frame {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    pub function_name_id: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub mapping_id: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub rel_pc: Option<u64>,
}

/// protos/perfetto/trace/profiling/profile_common.proto: frames from the
/// outermost (the root of the flame graph) to the allocating one.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Callstack {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "2")]
    pub frame_ids: Vec<u64>,
}
