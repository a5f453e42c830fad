//! Plugin files and directories, watched for changes.
//!
//! The watcher watches the directories given and the parent directory of each file given
//! (never a file's inode: editors and build scripts replace files by renaming a new one over
//! them). Events only say which plugin paths to look at again: once they have been quiet for
//! [`QUIET`] (or after [`MAX_DELAY`] of continuous change), each such path is read and its
//! current content decides (see [`decide`]): new bytes are installed, a vanished file's plugin
//! is removed, and bytes that already run, or were just refused, are left alone. A path names
//! its plugin's owner the way [`crate::loader::run`] does at start, so a new version replaces the
//! one the file started. The candidate files the configuration file names are watched alike
//! ([`super::candidates::reread`]).
//!
//! With a dev source (`wasmop run --dev-source`), its directory is watched too: a change of any
//! file in it makes every plugin path be looked at again, and a path's content is its bytes and
//! the dev source's files ([`DevSource::identity`]), so a saved edit is a new version.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecursiveMode, Watcher as _};
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::host::{Change, Host, HostError, plugin_files};
use crate::runtime::dev::DevSource;

/// How long a path's events must be quiet before it is read again.
pub const QUIET: Duration = Duration::from_millis(250);

/// The longest a changed path waits while its events keep coming.
pub const MAX_DELAY: Duration = Duration::from_secs(2);

/// Reloads `files` and the `*.wasm` files of `dirs` when they change, starts new ones and
/// removes deleted ones, and reads the files of `candidates` (by plugin name) again when they
/// change, until `shutdown` fires. A change in the directory of `source` reloads them all.
pub async fn watch(
    host: Arc<Host>,
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    candidates: BTreeMap<String, PathBuf>,
    source: Option<DevSource>,
    shutdown: CancellationToken,
) {
    let given: Vec<PathBuf> = files.iter().chain(candidates.values()).cloned().collect();
    let mut watched = Watched::new(&given, &dirs);
    watched.source = source.as_ref().map(|source| source.dir().to_path_buf());
    let (events, mut received) = mpsc::unbounded_channel();
    let mut watcher = match notify::recommended_watcher(move |event| {
        // The receiver is gone only once the watch has stopped.
        let _ = events.send(event);
    }) {
        Ok(watcher) => watcher,
        Err(err) => {
            tracing::error!(%err, "cannot watch plugin files: changes to them are not reloaded");
            shutdown.cancelled().await;
            return;
        }
    };
    for dir in watched.directories() {
        match watcher.watch(&dir, RecursiveMode::NonRecursive) {
            Ok(()) => tracing::info!(dir = %dir.display(), "watching plugin files"),
            Err(err) => tracing::error!(dir = %dir.display(), %err, "cannot watch plugin directory"),
        }
    }

    let candidates = candidates.into_iter().map(|(plugin, path)| (path, plugin)).collect();
    let mut reloader = Reloader { host, watched, candidates, refused: HashMap::new(), known: BTreeSet::new(), source };
    reloader.known.extend(files);
    for dir in &dirs {
        reloader.known.extend(plugin_files(dir).unwrap_or_default());
    }
    // Whatever changed between the start and the watch.
    let mut batch = Batch::default();
    batch.rescan(Instant::now());
    loop {
        let due = batch.due();
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            event = received.recv() => match event {
                Some(Ok(event)) => batch.add(&reloader.watched, &event, Instant::now()),
                Some(Err(err)) => {
                    // Events may have been lost: look at everything again.
                    tracing::warn!(%err, "plugin file watch error; rescanning");
                    batch.rescan(Instant::now());
                }
                None => break,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let (paths, rescan) = batch.take();
                reloader.apply(paths, rescan, &shutdown).await;
            }
        }
    }
    drop(watcher);
}

/// What is watched, and which owner each plugin path belongs to.
#[derive(Debug, Default)]
struct Watched {
    /// Each watched directory, canonical, and how it was given.
    dirs: HashMap<PathBuf, PathBuf>,
    /// Each given file, under its canonical parent directory, and how it was given.
    files: HashMap<PathBuf, PathBuf>,
    /// The dev source's directory, canonical: a change in it is a change of every plugin.
    source: Option<PathBuf>,
}

impl Watched {
    /// Resolves the given paths; one that cannot be resolved is logged and left unwatched.
    fn new(files: &[PathBuf], dirs: &[PathBuf]) -> Self {
        let mut watched = Self::default();
        for dir in dirs {
            match std::fs::canonicalize(dir) {
                Ok(canonical) => {
                    watched.dirs.insert(canonical, dir.clone());
                }
                Err(err) => tracing::error!(dir = %dir.display(), %err, "cannot watch plugin directory"),
            }
        }
        for file in files {
            let (Some(parent), Some(name)) = (file.parent(), file.file_name()) else {
                tracing::error!(file = %file.display(), "cannot watch plugin file: it names no file");
                continue;
            };
            let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            match std::fs::canonicalize(parent) {
                Ok(canonical) => {
                    watched.files.insert(canonical.join(name), file.clone());
                }
                Err(err) => tracing::error!(file = %file.display(), %err, "cannot watch plugin file"),
            }
        }
        watched
    }

    /// The directories to watch: the given ones and those of the given files, canonical.
    fn directories(&self) -> BTreeSet<PathBuf> {
        let parents = self.files.keys().filter_map(|f| f.parent()).map(Path::to_path_buf);
        self.dirs.keys().cloned().chain(parents).chain(self.source.clone()).collect()
    }

    /// The plugin `path` (as a watcher reports it) is, as given: a given file, or a `*.wasm`
    /// file of a given directory; `None` for any other path.
    fn plugin(&self, path: &Path) -> Option<PathBuf> {
        if let Some(given) = self.files.get(path) {
            return Some(given.clone());
        }
        let name = path.file_name()?;
        if Path::new(name).extension().is_none_or(|e| e != "wasm") {
            return None;
        }
        self.dirs.get(path.parent()?).map(|dir| dir.join(name))
    }

    /// Every plugin path there is now: the given files and the `*.wasm` files of the given
    /// directories.
    fn current(&self) -> BTreeSet<PathBuf> {
        let mut paths: BTreeSet<PathBuf> = self.files.values().cloned().collect();
        for dir in self.dirs.values() {
            match plugin_files(dir) {
                Ok(files) => paths.extend(files),
                Err(err) => tracing::warn!(%err, "cannot list plugin directory"),
            }
        }
        paths
    }
}

/// Whether an event of this kind can mean new content: reads and opens (ours too) cannot.
fn may_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Other => true,
    }
}

/// The plugin paths changed since the last look, and when.
#[derive(Debug, Default)]
struct Batch {
    paths: BTreeSet<PathBuf>,
    /// Whether every plugin path must be looked at (events were lost).
    rescan: bool,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Batch {
    /// Notes the plugin paths `event` may have changed.
    fn add(&mut self, watched: &Watched, event: &Event, now: Instant) {
        if event.need_rescan() {
            self.rescan(now);
            return;
        }
        if !may_change(&event.kind) {
            return;
        }
        if let Some(source) = &watched.source
            && event.paths.iter().any(|path| path.parent() == Some(source.as_path()))
        {
            self.rescan(now);
            return;
        }
        let mut plugins = event.paths.iter().filter_map(|p| watched.plugin(p)).peekable();
        if plugins.peek().is_some() {
            self.paths.extend(plugins);
            self.touched(now);
        }
    }

    /// Notes that every plugin path must be looked at.
    fn rescan(&mut self, now: Instant) {
        self.rescan = true;
        self.touched(now);
    }

    fn touched(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// When to look at the paths: once their events have been quiet for [`QUIET`], or
    /// [`MAX_DELAY`] after the first; `None` when nothing changed.
    fn due(&self) -> Option<Instant> {
        Some((self.last? + QUIET).min(self.first? + MAX_DELAY))
    }

    /// The paths to look at, and whether to look at all; starts a new batch.
    fn take(&mut self) -> (BTreeSet<PathBuf>, bool) {
        let taken = std::mem::take(self);
        (taken.paths, taken.rescan)
    }
}

/// What a plugin path holds now.
#[derive(Debug)]
enum FileState {
    /// No file (or no regular file) is there.
    Missing,
    /// A file is there, but it cannot be read.
    Unreadable(std::io::Error),
    /// The file's bytes and their sha256, hex encoded.
    Present { bytes: Vec<u8>, digest: String },
}

impl FileState {
    /// Reads `path` as the plugin running `source` (if any); blocks.
    fn read_with(path: &Path, source: Option<&DevSource>) -> Self {
        match (Self::read(path), source) {
            (Self::Present { bytes, digest }, Some(source)) => {
                Self::Present { digest: source.identity(&digest), bytes }
            }
            (state, _) => state,
        }
    }

    /// Reads `path`; blocks.
    fn read(path: &Path) -> Self {
        let missing = |err: &std::io::Error| err.kind() == std::io::ErrorKind::NotFound;
        match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => return Self::Missing,
            Ok(_) => {}
            Err(err) if missing(&err) => return Self::Missing,
            Err(err) => return Self::Unreadable(err),
        }
        match std::fs::read(path) {
            Ok(bytes) => {
                let digest = hex::encode(Sha256::digest(&bytes));
                Self::Present { bytes, digest }
            }
            Err(err) if missing(&err) => Self::Missing,
            Err(err) => Self::Unreadable(err),
        }
    }
}

/// What to do about a plugin path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Install its bytes.
    Install,
    /// Remove the plugin it runs.
    Remove,
    /// Nothing.
    Keep,
}

/// What to do about a path holding `state`, whose owner runs the module of digest `running`
/// (if any) and last had the bytes of digest `refused` refused (if any).
fn decide(state: &FileState, running: Option<&str>, refused: Option<&str>) -> Action {
    match state {
        FileState::Missing if running.is_some() => Action::Remove,
        FileState::Missing | FileState::Unreadable(_) => Action::Keep,
        FileState::Present { digest, .. } => {
            let digest = Some(digest.as_str());
            if digest == running || digest == refused { Action::Keep } else { Action::Install }
        }
    }
}

/// Applies the content of plugin paths to the host.
struct Reloader {
    host: Arc<Host>,
    watched: Watched,
    /// The candidate files, each with the name of its plugin.
    candidates: BTreeMap<PathBuf, String>,
    /// Per owner, the digest of the bytes last refused, until others come.
    refused: HashMap<String, String>,
    /// The plugin paths that ran a plugin, to notice their removal on a rescan.
    known: BTreeSet<PathBuf>,
    /// The dev source, when the host runs one.
    source: Option<DevSource>,
}

impl Reloader {
    /// Looks at `paths`, or at every plugin path if `rescan`, until `shutdown` fires.
    async fn apply(&mut self, mut paths: BTreeSet<PathBuf>, rescan: bool, shutdown: &CancellationToken) {
        if rescan {
            paths.extend(self.watched.current());
            paths.extend(self.known.iter().cloned());
        }
        for path in paths {
            if shutdown.is_cancelled() {
                return;
            }
            self.reload(path).await;
        }
    }

    /// The digest of the module `owner` runs, if any.
    fn running(&self, owner: &str) -> Option<String> {
        let owned = self.host.owned_by(owner);
        owned.iter().find_map(|name| self.host.module(name)).map(|m| m.digest().to_string())
    }

    /// Brings the plugin of `path` in line with the file, or the candidate it holds.
    async fn reload(&mut self, path: PathBuf) {
        if let Some(plugin) = self.candidates.get(&path) {
            let files: Vec<PathBuf> = self.watched.current().into_iter().collect();
            super::candidates::reread(&self.host, plugin, &path, &files).await;
            return;
        }
        let owner = path.display().to_string();
        let (read, source) = (path.clone(), self.source.clone());
        let state = match tokio::task::spawn_blocking(move || FileState::read_with(&read, source.as_ref())).await {
            Ok(state) => state,
            Err(err) => {
                tracing::error!(path = owner, %err, "cannot read plugin file");
                return;
            }
        };
        let running = self.running(&owner);
        match decide(&state, running.as_deref(), self.refused.get(&owner).map(String::as_str)) {
            Action::Keep => {
                if let FileState::Unreadable(err) = &state {
                    tracing::warn!(path = owner, %err, "cannot read plugin file; the running version, if any, stays");
                }
            }
            Action::Remove => {
                let removed = self.host.remove(&owner).await;
                tracing::info!(path = owner, plugins = ?removed, "plugin file removed: its plugin stopped");
                self.refused.remove(&owner);
                self.known.remove(&path);
            }
            Action::Install => {
                let FileState::Present { bytes, digest } = state else { return };
                self.install(&path, owner, bytes, digest).await;
            }
        }
    }

    /// Installs the new bytes of `path`; a refusal is logged and the running version stays.
    async fn install(&mut self, path: &Path, owner: String, bytes: Vec<u8>, digest: String) {
        match self.host.install(&owner, path, bytes, None).await {
            Ok(installed) => {
                self.refused.remove(&owner);
                self.known.insert(path.to_path_buf());
                if installed.change != Change::Unchanged {
                    tracing::info!(path = owner, plugin = installed.name, digest = installed.digest,
                        change = ?installed.change, "plugin file reloaded");
                }
                // A plugin started again has no candidate yet.
                let candidate = self.candidates.iter().find(|(_, plugin)| **plugin == installed.name);
                if let (Change::Started, Some((candidate, plugin))) = (installed.change, candidate) {
                    super::candidates::reread(&self.host, plugin, candidate, &[path.to_path_buf()]).await;
                }
                // The file now holds another plugin: the one it held before stops.
                for stale in self.host.owned_by(&owner).into_iter().filter(|name| *name != installed.name) {
                    self.host.stop(&stale).await;
                    tracing::info!(
                        path = owner,
                        plugin = stale,
                        now = installed.name,
                        "plugin stopped: its file now holds another plugin"
                    );
                }
            }
            Err(err) => {
                tracing::error!(path = owner, %err, "new plugin version refused; the running version, if any, stays");
                if matches!(err, HostError::Load(_)) {
                    // The same bytes would be refused again.
                    self.refused.insert(owner, digest);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, DataChange, Flag, ModifyKind, RemoveKind, RenameMode};

    use super::*;

    fn event(kind: EventKind, paths: &[&str]) -> Event {
        paths.iter().fold(Event::new(kind), |e, p| e.add_path(PathBuf::from(p)))
    }

    /// The plugin paths of `(canonical, given)` files and directories.
    fn watched(files: &[(&str, &str)], dirs: &[(&str, &str)]) -> Watched {
        let pairs = |pairs: &[(&str, &str)]| -> HashMap<PathBuf, PathBuf> {
            pairs.iter().map(|(c, g)| (PathBuf::from(c), PathBuf::from(g))).collect()
        };
        Watched { files: pairs(files), dirs: pairs(dirs), source: None }
    }

    fn sample() -> Watched {
        watched(
            &[("/real/etc/one.wasm", "etc/one.wasm"), ("/real/etc/two.bin", "etc/two.bin")],
            &[("/real/plugins", "./plugins")],
        )
    }

    #[test]
    fn plugin_paths_are_the_given_files_and_the_wasm_files_of_the_given_directories() {
        let watched = sample();
        let plugin = |p: &str| watched.plugin(Path::new(p));
        assert_eq!(plugin("/real/etc/one.wasm"), Some(PathBuf::from("etc/one.wasm")));
        assert_eq!(plugin("/real/etc/two.bin"), Some(PathBuf::from("etc/two.bin")), "a given file, whatever its name");
        assert_eq!(plugin("/real/plugins/a.wasm"), Some(PathBuf::from("./plugins/a.wasm")), "owned as given");
        assert_eq!(plugin("/real/etc/other.wasm"), None, "another file beside a given one");
        assert_eq!(plugin("/real/plugins/a.wasm.tmp"), None);
        assert_eq!(plugin("/real/plugins/.a.wasm.swp"), None);
        assert_eq!(plugin("/real/plugins/notes.txt"), None);
        assert_eq!(plugin("/real/plugins/wasm"), None);
        assert_eq!(plugin("/real/plugins/sub/a.wasm"), None, "not recursive");
        assert_eq!(plugin("/real/plugins"), None, "the directory itself");
        assert_eq!(plugin("/"), None);
    }

    #[test]
    fn the_owner_is_the_path_the_host_started_the_plugin_from() {
        let dir = std::env::temp_dir();
        let given = dir.join("x.wasm");
        let watched = Watched::new(std::slice::from_ref(&given), std::slice::from_ref(&dir));
        let canonical = std::fs::canonicalize(&dir).expect("the temp dir exists");
        assert_eq!(watched.directories(), BTreeSet::from([canonical.clone()]));
        assert_eq!(watched.plugin(&canonical.join("x.wasm")), Some(given));
        assert_eq!(watched.plugin(&canonical.join("y.wasm")), Some(dir.join("y.wasm")));
        let missing = Watched::new(&[PathBuf::from("/no/such/dir/x.wasm")], &[PathBuf::from("/no/such/dir")]);
        assert!(missing.directories().is_empty(), "what cannot be resolved is not watched");
    }

    #[test]
    fn writes_renames_and_removals_are_changes_but_reads_are_not() {
        let changes = [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Any,
        ];
        assert!(changes.iter().all(may_change));
        let reads = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Read),
        ];
        assert!(!reads.iter().any(may_change));
    }

    #[test]
    fn a_batch_collects_plugin_paths_and_is_due_once_quiet() {
        let watched = sample();
        let mut batch = Batch::default();
        let t0 = Instant::now();
        assert_eq!(batch.due(), None);
        batch.add(&watched, &event(EventKind::Create(CreateKind::File), &["/real/plugins/a.wasm.tmp"]), t0);
        batch.add(&watched, &event(EventKind::Access(AccessKind::Open(AccessMode::Any)), &["/real/etc/one.wasm"]), t0);
        assert_eq!(batch.due(), None, "a temporary file and a read change nothing");

        let rename = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        batch.add(&watched, &event(rename, &["/real/plugins/a.wasm.tmp", "/real/plugins/a.wasm"]), t0);
        assert_eq!(batch.due(), Some(t0 + QUIET));
        let t1 = t0 + Duration::from_millis(100);
        batch.add(&watched, &event(EventKind::Modify(ModifyKind::Any), &["/real/plugins/a.wasm"]), t1);
        assert_eq!(batch.due(), Some(t1 + QUIET), "each change of a path restarts the wait");
        let t2 = t0 + MAX_DELAY;
        batch.add(&watched, &event(EventKind::Remove(RemoveKind::File), &["/real/etc/one.wasm"]), t2);
        assert_eq!(batch.due(), Some(t0 + MAX_DELAY), "but no longer than the longest delay");

        let (paths, rescan) = batch.take();
        assert_eq!(paths, BTreeSet::from([PathBuf::from("./plugins/a.wasm"), PathBuf::from("etc/one.wasm")]));
        assert!(!rescan);
        assert_eq!(batch.due(), None, "a new batch starts empty");
    }

    #[test]
    fn lost_events_mean_a_rescan() {
        let mut batch = Batch::default();
        let t0 = Instant::now();
        batch.add(&sample(), &Event::new(EventKind::Other).set_flag(Flag::Rescan), t0);
        assert_eq!(batch.due(), Some(t0 + QUIET));
        assert_eq!(batch.take(), (BTreeSet::new(), true));
    }

    #[test]
    fn a_change_in_the_dev_source_means_a_rescan_and_reads_do_not() {
        let watched = Watched { source: Some(PathBuf::from("/real/src")), ..sample() };
        assert!(watched.directories().contains(Path::new("/real/src")), "the dev source is watched");
        let t0 = Instant::now();
        let mut batch = Batch::default();
        batch.add(&watched, &event(EventKind::Access(AccessKind::Read), &["/real/src/app.py"]), t0);
        assert_eq!(batch.due(), None, "a read changes nothing");
        batch.add(&watched, &event(EventKind::Modify(ModifyKind::Name(RenameMode::To)), &["/real/src/app.py"]), t0);
        assert_eq!(batch.take(), (BTreeSet::new(), true));
        batch.add(&watched, &event(EventKind::Modify(ModifyKind::Any), &["/real/elsewhere/app.py"]), t0);
        assert_eq!(batch.due(), None, "another directory is not the dev source");
    }

    fn present(digest: &str) -> FileState {
        FileState::Present { bytes: Vec::new(), digest: digest.into() }
    }

    #[test]
    fn new_bytes_are_installed_and_the_same_or_refused_ones_skipped() {
        assert_eq!(decide(&present("b"), None, None), Action::Install, "a new plugin");
        assert_eq!(decide(&present("b"), Some("a"), None), Action::Install, "a new version");
        assert_eq!(decide(&present("b"), Some("a"), Some("c")), Action::Install, "other bytes than those refused");
        assert_eq!(decide(&present("a"), Some("a"), None), Action::Keep, "the running version");
        assert_eq!(decide(&present("c"), Some("a"), Some("c")), Action::Keep, "the bytes just refused");
        assert_eq!(decide(&present("c"), None, Some("c")), Action::Keep);
    }

    #[test]
    fn a_vanished_file_removes_its_plugin_and_an_unreadable_one_keeps_it() {
        assert_eq!(decide(&FileState::Missing, Some("a"), None), Action::Remove);
        assert_eq!(decide(&FileState::Missing, None, Some("c")), Action::Keep, "nothing runs");
        let denied = FileState::Unreadable(std::io::ErrorKind::PermissionDenied.into());
        assert_eq!(decide(&denied, Some("a"), None), Action::Keep);
    }

    #[test]
    fn a_file_is_read_with_its_digest_or_found_missing() {
        let dir = std::env::temp_dir().join(format!("wasmop-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("p.wasm");
        std::fs::write(&file, b"abc").expect("written");
        match FileState::read(&file) {
            FileState::Present { bytes, digest } => {
                assert_eq!(bytes, b"abc");
                assert_eq!(digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
            }
            other => panic!("read {other:?}"),
        }
        assert!(matches!(FileState::read(&dir), FileState::Missing), "a directory is no plugin file");
        std::fs::remove_file(&file).expect("removed");
        assert!(matches!(FileState::read(&file), FileState::Missing));
        std::fs::remove_dir(&dir).ok();
    }
}
