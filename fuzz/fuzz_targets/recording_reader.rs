//! Any bytes at all through the recording reader (formats v1 to v3, packs
//! included): it must return an error or a recording whose columns line up,
//! never panic, hang or allocate without bound. Under `cfg(fuzzing)` the
//! reader skips frame checksums, so mutations reach the inflater and the
//! MessagePack, column-block and schema decoders instead of dying at the CRC.
#![no_main]

use std::path::Path;

use flatline_format::Recording;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(rec) = Recording::from_bytes(data, Path::new("fuzz.flr")) {
        assert_eq!(rec.columns.len(), rec.header.schema.len());
        assert_eq!(rec.lifetimes.len(), rec.header.schema.len());
        for (i, col) in rec.columns.iter().enumerate() {
            assert_eq!(col.len(), rec.t_ns.len());
            // A channel carries no value outside its lifetime.
            for (at, v) in col.iter().enumerate() {
                assert!(v.is_nan() || rec.is_live(i, at), "channel {i} at {at}");
            }
        }
        assert!(rec.bytes <= data.len() as u64);
        let _ = rec.duration_s();
    }
});
