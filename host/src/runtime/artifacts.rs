//! On-disk cache of compiled components, keyed by the module's sha256 and the engine's
//! compatibility hash, so a restart loads a plugin in well under a millisecond.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled artifacts live; `None` disables the cache.
#[derive(Debug, Clone)]
pub(crate) struct ArtifactCache {
    dir: Option<PathBuf>,
}

/// Feeds `Hash` output into a sha256 so the engine hash is stable across processes.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        unreachable!("only the sha256 digest is read")
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl ArtifactCache {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// Loads the compiled form of `bytes` (whose sha256 is `digest`) from the cache, or compiles
    /// it and stores the result. Cache I/O failures only cost a recompile.
    pub(crate) fn load_or_compile(&self, engine: &Engine, digest: &str, bytes: &[u8]) -> wasmtime::Result<Component> {
        let Some(dir) = &self.dir else { return Component::new(engine, bytes) };
        let path = dir.join(format!("{digest}-{}.cwasm", engine_key(engine)));
        if path.exists() {
            match deserialize(engine, &path) {
                Ok(component) => return Ok(component),
                Err(err) => tracing::warn!(path = %path.display(), %err, "discarding unreadable compiled artifact"),
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(err) = store(&path, &component) {
            tracing::warn!(path = %path.display(), %err, "cannot write compiled artifact cache");
            return Ok(component);
        }
        // Map what was just stored rather than keep the compiled copy: its code and the initial
        // memory images of its instances are then file pages, shared by every plugin and
        // process that loads this module and droppable by the kernel, not anonymous memory (tens
        // of MiB for a Python or JavaScript runtime).
        match deserialize(engine, &path) {
            Ok(mapped) => Ok(mapped),
            Err(err) => {
                tracing::warn!(path = %path.display(), %err, "cannot map the compiled artifact just stored");
                Ok(component)
            }
        }
    }
}

/// A short hex key of the engine's settings and version.
fn engine_key(engine: &Engine) -> String {
    let mut hasher = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..8])
}

#[allow(unsafe_code, reason = "only artifacts this host serialized itself are loaded, keyed by engine settings")]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: the file was written by `store` below from `Component::serialize` of an engine
    // with the same compatibility hash (part of the file name).
    unsafe { Component::deserialize_file(engine, path) }
}

fn store(path: &Path, component: &Component) -> std::io::Result<()> {
    let dir = path.parent().expect("artifact paths have a parent");
    std::fs::create_dir_all(dir)?;
    // Unique per writer, so concurrent compiles of one module never share a temporary file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{}-{n}.tmp", std::process::id()));
    let bytes = component.serialize().map_err(|e| std::io::Error::other(e.to_string()))?;
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
