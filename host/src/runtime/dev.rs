//! The dev source: a plugin's source directory that `wasmop run --dev-source` gives, read-only,
//! to every instance of the plugins it runs, so that a dev runtime (a component built once per
//! SDK that runs the source it reads there) runs each saved edit without a build.
//!
//! Only the command line names a dev source: a plugin loaded any other way (a ReconcilerPlugin,
//! an OCI reference, `wasmop run` without the flag) gets no directory at all, and a dev runtime
//! has nothing to run there.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// Where instances find the dev source's directory.
pub const GUEST_DIR: &str = "/plugin";

/// A plugin's source directory, given to its instances read-only at [`GUEST_DIR`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevSource {
    dir: PathBuf,
}

impl DevSource {
    /// The source directory `dir`; an error when it is not a directory.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        let dir = std::fs::canonicalize(dir)?;
        if !dir.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(Self { dir })
    }

    /// The directory, canonical.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The identity of the module of digest `digest` running the source as it is now: the
    /// sha256 of the digest and of the name and content of each file of the directory (hidden
    /// files and subdirectories left out), hex encoded. A saved edit changes it, so the host
    /// sees a new version of the plugin.
    pub fn identity(&self, digest: &str) -> String {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
            .map(|entry| entry.path())
            .collect();
        files.sort();
        let mut hash = Sha256::new();
        hash.update(digest.as_bytes());
        for file in files {
            hash.update(file.file_name().unwrap_or_default().as_encoded_bytes());
            hash.update([0]);
            hash.update(Sha256::digest(std::fs::read(&file).unwrap_or_default()));
        }
        hex::encode(hash.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty directory of this test's own.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wasmop-dev-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_edit_changes_the_identity_and_hidden_files_do_not() {
        let dir = scratch("edit");
        std::fs::write(dir.join("app.py"), "one").unwrap();
        let source = DevSource::new(&dir).unwrap();
        let before = source.identity("d");
        std::fs::write(dir.join(".app.py.swp"), "noise").unwrap();
        assert_eq!(source.identity("d"), before);
        assert_ne!(source.identity("e"), before);
        std::fs::write(dir.join("app.py"), "two").unwrap();
        assert_ne!(source.identity("d"), before);
    }

    #[test]
    fn a_file_is_no_source() {
        let file = scratch("file").join("app.py");
        std::fs::write(&file, "").unwrap();
        assert!(DevSource::new(&file).is_err());
    }
}
