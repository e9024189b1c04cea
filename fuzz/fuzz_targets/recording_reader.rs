//! Any bytes at all through the recording reader: it must return an error or
//! a recording whose columns line up, never panic, hang or allocate without
//! bound. Under `cfg(fuzzing)` the reader skips frame checksums, so mutations
//! reach the MessagePack and sample-block decoders instead of dying at the CRC.
#![no_main]

use std::path::Path;

use flatline_runtime::recording::Recording;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(rec) = Recording::from_bytes(data, Path::new("fuzz.flr")) {
        assert_eq!(rec.columns.len(), rec.header.schema.len());
        for col in &rec.columns {
            assert_eq!(col.len(), rec.t_ns.len());
        }
        assert!(rec.bytes <= data.len() as u64);
        let _ = rec.duration_s();
    }
});
