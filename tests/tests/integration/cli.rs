//! The binary as a Unix tool: its output goes to pipes and files as well as to terminals.

use std::process::{Command, Stdio};

use wasmop_tests::{plugin, relocation_bytes, wasmop_binary, workspace_root};

/// `wasmop inspect` on a plugin, logging at debug level (the engine logs a few lines then).
fn inspect() -> anyhow::Result<Command> {
    let mut command = Command::new(wasmop_binary()?);
    command.arg("inspect").arg(workspace_root().join("plugins/dist/greeting.wasm")).env("RUST_LOG", "debug");
    Ok(command)
}

/// Piped into `head` (which exits early), the output ends quietly, as Unix tools do.
#[test]
fn a_closed_stdout_ends_inspect_quietly() -> anyhow::Result<()> {
    let (reader, writer) = std::io::pipe()?;
    drop(reader);
    let output = inspect()?.env("RUST_LOG", "off").stdout(writer).stderr(Stdio::piped()).output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    assert!(stderr.is_empty(), "{stderr}");
    Ok(())
}

/// Logs written to a pipe or a file carry no colour codes; a terminal gets them unless
/// `NO_COLOR` is set (https://no-color.org), which the pure rule's unit test covers.
#[test]
fn logs_to_a_pipe_have_no_colour_codes() -> anyhow::Result<()> {
    let output = inspect()?.stdout(Stdio::null()).output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("DEBUG"), "the test needs a log line: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    Ok(())
}

/// `wasmop inspect` shows what a plugin reaches beyond the API server, naming the Secrets (never
/// their values) and the origins.
#[test]
fn inspect_shows_granted_http_polling_inbound_and_external_dependents() -> anyhow::Result<()> {
    let output = Command::new(wasmop_binary()?)
        .args(["inspect", "--output", "json"])
        .arg(workspace_root().join("plugins/dist/dnsrecord.wasm"))
        .env("RUST_LOG", "off")
        .output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let described: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(described["http"]["origins"][0]["origin"], "http://127.0.0.1:18053");
    assert_eq!(described["http"]["origins"][0]["secretHeaders"][0]["header"], "authorization");
    assert_eq!(described["polling"]["periodMs"], 2000);
    assert_eq!(described["inbound"]["caching"], false);
    assert_eq!(described["externalDependents"][0]["name"], "record");
    assert_eq!(described["finalizer"], "wasmop.dev/dnsrecord", "external dependents need the finalizer");
    Ok(())
}

/// `wasmop inspect` shows the sharding a plugin declares in its own code under `settings:`, in
/// the overrides file's words; a plugin that declares none has no `sharding` there (the host's
/// default, by UID).
#[test]
fn inspect_shows_the_sharding_a_plugin_declares() -> anyhow::Result<()> {
    let settings = |name: &str| -> anyhow::Result<serde_json::Value> {
        let output = Command::new(wasmop_binary()?)
            .args(["inspect", "--output", "json"])
            .arg(plugin(name))
            .env("RUST_LOG", "off")
            .output()?;
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        Ok(serde_json::from_slice::<serde_json::Value>(&output.stdout)?["settings"].clone())
    };
    assert_eq!(settings("fixture-shard-leader")?["sharding"], "none");
    assert_eq!(settings("fixture-shard")?.get("sharding"), None);
    Ok(())
}

#[test]
fn compiled_plugins_go_to_the_modules_directory_of_wasmop_cache() -> anyhow::Result<()> {
    let cache = workspace_root().join(format!("target/cli-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let output = Command::new(wasmop_binary()?)
        .arg("inspect")
        .arg(plugin("greeting"))
        .env_remove("WASMOP_CACHE_DIR")
        .env("WASMOP_CACHE", &cache)
        .output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stored: Vec<_> = std::fs::read_dir(cache.join("modules"))?.collect();
    assert_eq!(stored.len(), 1, "one compiled artifact in $WASMOP_CACHE/modules: {stored:?}");
    std::fs::remove_dir_all(&cache)?;
    Ok(())
}

/// The glibc of this machine, as `getconf GNU_LIBC_VERSION` gives it: `(major, minor)`.
fn glibc() -> Option<(u32, u32)> {
    let out = Command::new("getconf").arg("GNU_LIBC_VERSION").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut parts = text.trim().strip_prefix("glibc ")?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[test]
fn the_host_packs_its_relocations_where_glibc_loads_them() -> anyhow::Result<()> {
    // `WASMOP_LAYOUT=off` at build time links as rustc does, unpacked.
    if std::env::var("WASMOP_LAYOUT").is_ok_and(|v| v == "off") {
        return Ok(());
    }
    // The binary every other test runs, so its packed form also loads and serves.
    let relocations = relocation_bytes(&wasmop_binary()?)?;
    if glibc().is_some_and(|v| v >= (2, 36)) {
        assert!(
            relocations.relr > 0 && relocations.rela < 64 * 1024,
            "on glibc 2.36 or later the host packs its relocations (host/build.rs): {relocations:?}"
        );
    } else {
        assert_eq!(relocations.relr, 0, "an older glibc cannot load packed relocations: {relocations:?}");
    }
    Ok(())
}

/// The wasmtime version Cargo resolved for the host (`cargo tree`), e.g. `48.0.8`.
fn resolved_wasmtime() -> anyhow::Result<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = workspace_root().join("Cargo.toml");
    let out = Command::new(cargo)
        .args(["tree", "--offline", "--locked", "-p", "wasmop", "-e", "normal", "-i", "wasmtime", "--depth", "0"])
        .args(["--prefix", "none", "--manifest-path"])
        .arg(manifest)
        .output()?;
    anyhow::ensure!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout)?;
    let version = text.lines().next().and_then(|line| line.strip_prefix("wasmtime v"));
    Ok(version.ok_or_else(|| anyhow::anyhow!("cargo tree names no wasmtime: {text}"))?.to_string())
}

/// `wasmop version` names the host's version (the crate's; a build given `GIT_REVISION`, as the
/// image's is, adds the revision: see `in_cluster.rs`), the contract it serves, as `wit/`
/// declares it, and the wasmtime it runs plugins on, as Cargo resolved it; `--version` prints
/// its first line.
#[test]
fn version_names_the_host_the_contract_and_wasmtime() -> anyhow::Result<()> {
    let output = Command::new(wasmop_binary()?).arg("version").env("RUST_LOG", "off").output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout)?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let host = format!("wasmop {}", env!("CARGO_PKG_VERSION"));
    assert!(lines[0] == host || lines[0].starts_with(&format!("{host} (revision ")), "{text}");
    let wit = std::fs::read_to_string(workspace_root().join("wit/plugin.wit"))?;
    let package = wit.lines().find_map(|line| line.strip_prefix("package ")?.strip_suffix(';'));
    assert_eq!(lines[1], format!("contract: {}", package.expect("wit/plugin.wit names its package")));
    assert_eq!(lines[2], format!("wasmtime: {}", resolved_wasmtime()?));
    let short = Command::new(wasmop_binary()?).arg("--version").output()?;
    assert!(short.status.success());
    assert_eq!(String::from_utf8(short.stdout)?, format!("{}\n", lines[0]));
    Ok(())
}
