//! `malloc.*` channels: glibc's own view of its heap (`mallinfo2`), where the
//! seed's "ptmalloc sub-arena" steps live. Only for this process, only on glibc.

use super::{ChannelSpec, Probe, ProbeError, Unavailable, catalog};
use flatline_arena::sys::malloc_info;

#[derive(Debug)]
pub struct MallocProbe(());

impl MallocProbe {
    pub fn new() -> Result<Self, Unavailable> {
        match malloc_info() {
            Some(_) => Ok(Self(())),
            None => Err(Unavailable::new(
                "malloc",
                "glibc malloc statistics (mallinfo2) exist only on Linux with glibc",
            )),
        }
    }
}

impl Probe for MallocProbe {
    fn name(&self) -> &'static str {
        "malloc"
    }

    fn channels(&self) -> Vec<ChannelSpec> {
        [
            "malloc.arena",
            "malloc.mmap",
            "malloc.in_use",
            "malloc.free",
        ]
        .into_iter()
        .map(catalog::spec)
        .collect()
    }

    fn read(&mut self, out: &mut [f64]) -> Result<(), ProbeError> {
        let m = malloc_info().ok_or_else(|| ProbeError::Failed("mallinfo2 unavailable".into()))?;
        out.copy_from_slice(&[
            m.arena as f64,
            m.mmap as f64,
            m.in_use as f64,
            m.free as f64,
        ]);
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[cfg_attr(miri, ignore = "Miri does not model glibc's malloc")]
    fn reads_four_positive_figures() {
        let mut p = MallocProbe::new().unwrap();
        let mut out = [f64::NAN; 4];
        p.read(&mut out).unwrap();
        assert!(out.iter().all(|v| v.is_finite() && *v >= 0.0), "{out:?}");
        assert!(out[0] > 0.0 && out[2] > 0.0);
    }
}
