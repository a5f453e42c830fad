//! Per-call resource limits: the epoch deadline, the memory cap and the optional fuel budget.

use std::time::Duration;

/// Limits applied to every call into a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Running time one call may use: the epoch ticks that pass while its code runs, not the
    /// time it waits for a runtime thread or in a host import (enforced by epoch interruption).
    /// By the wall clock, waiting included, a call may take [`WALL_CLOCK_FACTOR`] times this.
    pub deadline: Duration,
    /// Maximum linear memory of one instance, in bytes.
    pub memory_bytes: usize,
    /// Instructions (wasmtime fuel units) one call may execute; `None` runs unmetered, which is
    /// about a third faster.
    pub fuel: Option<u64>,
}

/// How many times its [`Limits::deadline`] a call may take by the wall clock, waiting for a
/// thread or in host imports included, before it is interrupted anyway: a backstop for a call
/// stuck in a host import, whose waiting the deadline does not count.
pub const WALL_CLOCK_FACTOR: u32 = 10;

impl Limits {
    /// The wall-clock backstop of one call: [`WALL_CLOCK_FACTOR`] times the deadline.
    pub fn wall_clock(&self) -> Duration {
        self.deadline.saturating_mul(WALL_CLOCK_FACTOR)
    }
}

impl Default for Limits {
    /// 5 s per call, 64 MiB of memory, no fuel budget.
    fn default() -> Self {
        Self { deadline: Duration::from_secs(5), memory_bytes: 64 << 20, fuel: None }
    }
}

pub use wasmop_core::settings::MemoryMib;

/// The memory cap a plugin ran into.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("memory limit of {} MiB exceeded: the plugin asked for {} MiB", limit >> 20, requested >> 20)]
pub struct MemoryLimitExceeded {
    /// The cap in bytes.
    pub limit: usize,
    /// The size the plugin tried to grow to, in bytes.
    pub requested: usize,
}

/// Enforces [`Limits::memory_bytes`], remembers whether the cap was hit and how much the
/// instance's memories grew after they were made.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit: usize,
    pub(crate) exceeded: Option<MemoryLimitExceeded>,
    grown: usize,
}

/// Table elements allowed per instance; far above what compiled Rust needs.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl MemoryLimiter {
    pub(crate) fn new(limit: usize) -> Self {
        Self { limit, exceeded: None, grown: 0 }
    }

    /// Bytes the instance's memories grew by since they were made (their initial sizes not
    /// counted).
    pub(crate) fn grown(&self) -> usize {
        self.grown
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.limit {
            let exceeded = MemoryLimitExceeded { limit: self.limit, requested: desired };
            self.exceeded = Some(exceeded);
            return Err(exceeded.into());
        }
        // A memory being made asks with `current` 0: that is its initial size, not growth.
        if current > 0 {
            self.grown += desired.saturating_sub(current);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
