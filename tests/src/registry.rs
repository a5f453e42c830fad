//! A real OCI registry for the tests: the CNCF distribution registry that
//! `tests/testbed/build-registry.sh` builds from pinned sources, serving plain http on a free
//! 127.0.0.1 port from a temporary directory (filesystem storage), with or without htpasswd
//! authentication. [`Registry::stop`] stops exactly the process it started, and
//! [`Registry::restart`] starts it again on the same port with the same content (a registry that
//! went down and came back).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

use crate::workspace_root;

/// A running (or stopped) registry.
pub struct Registry {
    binary: PathBuf,
    dir: PathBuf,
    /// `127.0.0.1:PORT`, as references name the registry.
    pub address: String,
    child: Option<Child>,
}

/// The registry binary: `WASMOP_TEST_REGISTRY`, else what `build-registry.sh` prints (it builds
/// it once into the cache).
fn binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("WASMOP_TEST_REGISTRY") {
        return Ok(path.into());
    }
    let script = workspace_root().join("tests/testbed/build-registry.sh");
    let out = std::process::Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    anyhow::ensure!(out.status.success(), "{} failed", script.display());
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

impl Registry {
    /// Starts a registry; with `user` (name and password) it answers only requests with those
    /// credentials.
    pub async fn start(user: Option<(&str, &str)>) -> anyhow::Result<Self> {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let binary = binary()?;
        let dir = std::env::temp_dir().join(format!("wasmop-registry-{}-{n}", std::process::id()));
        std::fs::create_dir_all(dir.join("data"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let address = format!("127.0.0.1:{port}");
        let auth = match user {
            None => String::new(),
            Some((name, password)) => {
                let htpasswd = htpasswd(&binary, name, password).await?;
                std::fs::write(dir.join("htpasswd"), htpasswd)?;
                format!("auth:\n  htpasswd:\n    realm: wasmop-tests\n    path: {}\n", dir.join("htpasswd").display())
            }
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    \
             rootdirectory: {}\n{auth}http:\n  addr: {address}\n  secret: wasmop-tests\n",
            dir.join("data").display()
        );
        std::fs::write(dir.join("config.yml"), config)?;
        let mut registry = Self { binary, dir, address, child: None };
        registry.restart().await?;
        Ok(registry)
    }

    /// Starts the registry again (after [`Registry::stop`]) on the same port, with its content;
    /// returns once it accepts connections.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.child.is_none(), "the registry runs already");
        let child = Command::new(&self.binary)
            .arg("serve")
            .arg(self.dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("registry.log"))?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.child = Some(child);
        let started = Instant::now();
        while tokio::net::TcpStream::connect(&self.address).await.is_err() {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let log = std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default();
                self.child = None;
                bail!("the registry exited ({status}): {log}");
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("the registry does not listen on {} after 30 s", self.address);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Stops the registry process this started (its content stays for [`Registry::restart`]).
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An htpasswd line for `name` and `password`, made by the registry binary itself (bcrypt).
async fn htpasswd(binary: &PathBuf, name: &str, password: &str) -> anyhow::Result<String> {
    use tokio::io::AsyncWriteExt as _;
    let mut child = Command::new(binary)
        .args(["htpasswd", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    stdin.write_all(format!("{password}\n").as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    anyhow::ensure!(out.status.success(), "registry htpasswd failed");
    Ok(String::from_utf8(out.stdout)?)
}
