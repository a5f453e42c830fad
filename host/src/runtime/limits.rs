//! Per-call resource limits: the epoch deadline, the memory cap and the optional fuel budget.

use std::time::Duration;

/// Limits applied to every call into a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (enforced by epoch interruption).
    pub deadline: Duration,
    /// Maximum linear memory of one instance, in bytes.
    pub memory_bytes: usize,
    /// Instructions (wasmtime fuel units) one call may execute; `None` runs unmetered, which is
    /// about a third faster.
    pub fuel: Option<u64>,
}

impl Default for Limits {
    /// 5 s per call, 64 MiB of memory, no fuel budget.
    fn default() -> Self {
        Self { deadline: Duration::from_secs(5), memory_bytes: 64 << 20, fuel: None }
    }
}

/// A memory cap in MiB, checked to lie within 1 to 4096 MiB: a wasm32 memory cannot grow past
/// 4 GiB, and the byte count can then never overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "u64")]
pub struct MemoryMib(u32);

impl MemoryMib {
    /// The largest cap: all a wasm32 memory can address.
    pub const MAX: u32 = 4096;

    /// The cap in bytes.
    pub fn bytes(self) -> usize {
        usize::try_from(u64::from(self.0) << 20).unwrap_or(usize::MAX)
    }
}

impl TryFrom<u64> for MemoryMib {
    type Error = String;

    fn try_from(mib: u64) -> Result<Self, Self::Error> {
        match u32::try_from(mib) {
            Ok(mib @ 1..=Self::MAX) => Ok(Self(mib)),
            _ => Err(format!(
                "a memory limit of {mib} MiB is out of range: 1 to {} MiB (a wasm32 memory cannot exceed 4 GiB)",
                Self::MAX
            )),
        }
    }
}

impl std::str::FromStr for MemoryMib {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<u64>().map_err(|e| format!("{s:?} is not a number of MiB: {e}"))?.try_into()
    }
}

impl std::fmt::Display for MemoryMib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The memory cap a plugin ran into.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("memory limit of {} MiB exceeded: the plugin asked for {} MiB", limit >> 20, requested >> 20)]
pub struct MemoryLimitExceeded {
    /// The cap in bytes.
    pub limit: usize,
    /// The size the plugin tried to grow to, in bytes.
    pub requested: usize,
}

/// Enforces [`Limits::memory_bytes`] and remembers whether the cap was hit.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit: usize,
    pub(crate) exceeded: Option<MemoryLimitExceeded>,
}

/// Table elements allowed per instance; far above what compiled Rust needs.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl MemoryLimiter {
    pub(crate) fn new(limit: usize) -> Self {
        Self { limit, exceeded: None }
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.limit {
            let exceeded = MemoryLimitExceeded { limit: self.limit, requested: desired };
            self.exceeded = Some(exceeded);
            return Err(exceeded.into());
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_caps_are_checked_before_they_become_bytes() {
        assert_eq!("64".parse::<MemoryMib>().unwrap().bytes(), 64 << 20);
        assert_eq!("4096".parse::<MemoryMib>().unwrap().bytes(), 4 << 30);
        for bad in ["0", "4097", "18446744073709551615", "-1", "lots"] {
            let err = bad.parse::<MemoryMib>().unwrap_err();
            assert!(err.contains("MiB"), "{bad}: {err}");
        }
    }
}
