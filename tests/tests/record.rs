//! Recording reconciles (`wasmop run --record DIR`) and replaying them (`wasmop replay`),
//! against the API server, with the `fixture-record` plugin (v1 fails for a negative
//! `spec.value`; `fixture-record-v2` fixes that) on the Swap CRD, and with the `dnsrecord`
//! sample, whose external dependent lives in an HTTP service (`wasmop_tests::records`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmop_tests::{apply_file, client, http_get, kubeconfig, namespace, plugin, until, wasmop_binary, workspace_root};

/// A `wasmop run` process recording into a directory of its own; killed when dropped.
struct Recording {
    child: Child,
    dir: PathBuf,
    metrics: std::net::SocketAddr,
    /// The plugin recorded.
    plugin: &'static str,
}

impl Recording {
    /// Runs `fixture-record` on `ns`, recording into a fresh directory, with the overrides
    /// `overrides` (YAML lines of its entry, indented by four) beside the operator's word that it
    /// may watch Secrets.
    fn start(ns: &str, overrides: &str) -> anyhow::Result<Self> {
        let config = format!("plugins:\n  fixture-record:\n    allowSecretWatches: true\n{overrides}");
        Self::start_plugin("fixture-record", ns, Some(&config))
    }

    /// Runs the plugin `name` (in `plugins/dist`) on `ns`, recording into a fresh directory,
    /// with the overrides `config` (YAML) when given.
    fn start_plugin(name: &'static str, ns: &str, config: Option<&str>) -> anyhow::Result<Self> {
        let dir = workspace_root().join(format!("target/records-{ns}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let mut command = Command::new(wasmop_binary()?);
        command
            .args(["run", "--namespace", ns, "--metrics-address", &metrics.to_string(), "--record"])
            .arg(dir.join("records"))
            .arg("--plugin")
            .arg(plugin(name))
            .env("KUBECONFIG", kubeconfig())
            .env("WASMOP_CACHE_DIR", workspace_root().join("target/wasmop-test-cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("wasmop.log"))?);
        if let Some(config) = config {
            std::fs::write(dir.join("config.yaml"), config)?;
            command.arg("--config").arg(dir.join("config.yaml"));
        }
        Ok(Self { child: command.spawn()?, dir, metrics, plugin: name })
    }

    /// The sum of the metric `name` (all its series), 0 while the process does not answer.
    async fn metric(&self, name: &str) -> u64 {
        let Some(text) = http_get(self.metrics, "/metrics").await else { return 0 };
        let lines = text.lines().filter(|l| l.starts_with(name));
        lines.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum::<f64>() as u64
    }

    /// The plugin's directory of records.
    fn records(&self) -> PathBuf {
        self.dir.join("records").join(self.plugin)
    }

    /// The plugin's records, by name.
    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.records())
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.retain(|path| path.extension().is_some_and(|e| e == "json"));
        files.sort();
        files
    }

    /// Waits for the records of `export` (its recorded name, e.g. `applyExternal`): their text
    /// and file, in order.
    async fn of_export(&self, export: &str) -> anyhow::Result<Vec<(String, PathBuf)>> {
        let needle = format!(r#""export":"{export}""#);
        until(
            &format!("a record of {export}"),
            async || {
                let texts = self.files().into_iter().filter_map(|f| Some((std::fs::read_to_string(&f).ok()?, f)));
                Ok(texts.filter(|(text, _)| text.contains(&needle)).collect::<Vec<_>>())
            },
            |found| !found.is_empty(),
        )
        .await
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The objects of custom kind `kind` (`plural`) of `group`/v1 in `ns`.
fn custom(client: &Client, ns: &str, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", kind);
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, plural))
}

fn swaps(client: &Client, ns: &str) -> Api<DynamicObject> {
    custom(client, ns, "test.wasmop.dev", "Swap", "swaps")
}

/// Creates the Swap `name` with `spec.value` `value`, reading the Secret `secret` if given.
async fn create_swap(client: &Client, ns: &str, name: &str, value: i64, secret: Option<&str>) -> anyhow::Result<()> {
    let annotations = secret.map(|s| json!({ "test.wasmop.dev/secret": s })).unwrap_or(json!({}));
    let swap = json!({
        "apiVersion": "test.wasmop.dev/v1", "kind": "Swap",
        "metadata": { "name": name, "annotations": annotations }, "spec": { "value": value },
    });
    swaps(client, ns).create(&PostParams::default(), &serde_json::from_value(swap)?).await?;
    Ok(())
}

/// The Swap CRD and a namespace of the test's own.
async fn setup(test: &str) -> anyhow::Result<(Client, String)> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, test).await?;
    Ok((client, ns))
}

/// `wasmop replay` with `args`.
fn replay(record: &Path, args: &[&Path]) -> anyhow::Result<Output> {
    let mut command = Command::new(wasmop_binary()?);
    command.arg("replay").arg(record).env("RUST_LOG", "off");
    for arg in args {
        command.arg(arg);
    }
    Ok(command.output()?)
}

/// Waits until the plugin has at least `n` records.
async fn until_recorded(recording: &Recording, n: usize) -> anyhow::Result<Vec<PathBuf>> {
    until("the records", async || Ok(recording.files()), |files| files.len() >= n).await
}

#[tokio::test]
async fn a_failed_reconcile_is_recorded_replays_bit_exact_and_shows_the_fix_against_v2() -> anyhow::Result<()> {
    let (client, ns) = setup("record-failed").await?;
    let recording = Recording::start(&ns, "")?;
    create_swap(&client, &ns, "fine", 4, None).await?;
    create_swap(&client, &ns, "broken", -3, None).await?;
    let files = until_recorded(&recording, 1).await?;
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with(".json") && name.contains(&format!("-{ns}-broken-failed-")), "{name}");
    // Only the failure is recorded: the other Swap reconciled.
    until(
        "the fine Swap's status",
        async || Ok(swaps(&client, &ns).get("fine").await?),
        |s| s.data["status"]["result"] == 4,
    )
    .await?;
    assert_eq!(recording.files().len(), 1, "{:?}", recording.files());

    let same = replay(&files[0], &[Path::new("--module"), &plugin("fixture-record")])?;
    let (stdout, stderr) = (String::from_utf8_lossy(&same.stdout), String::from_utf8_lossy(&same.stderr));
    assert!(same.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "bit-exact\n");

    // A record whose log line was changed: the replay names that call and exits 1.
    let changed = recording.dir.join("changed.json");
    let text = std::fs::read_to_string(&files[0])?;
    assert!(text.contains("hash order"), "the fixture's log line: {text}");
    std::fs::write(&changed, text.replace("hash order", "hash 0rder"))?;
    let diverged = replay(&changed, &[Path::new("--module"), &plugin("fixture-record")])?;
    let stderr = String::from_utf8_lossy(&diverged.stderr);
    assert_eq!(diverged.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("diverged at step 0 (reconcile), import call "), "{stderr}");
    assert!(stderr.contains("the record has `log info \"at ") && stderr.contains("hash 0rder"), "{stderr}");

    let fixed = replay(&files[0], &[Path::new("--plugin"), &plugin("fixture-record-v2")])?;
    let (stdout, stderr) = (String::from_utf8_lossy(&fixed.stdout), String::from_utf8_lossy(&fixed.stderr));
    assert!(fixed.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("verdict: failed (permanent): negative value → reconciled"), "{stdout}");
    assert!(stdout.contains("result: added 3"), "{stdout}");

    let wrong = replay(&files[0], &[Path::new("--module"), &plugin("fixture-record-v2")])?;
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not the one the record was made with"), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn a_record_of_a_plugin_that_reads_a_secret_holds_none_of_its_data() -> anyhow::Result<()> {
    let (client, ns) = setup("record-secret").await?;
    let token = "correct-horse-battery-staple-42";
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "creds", "labels": { "test.wasmop.dev/record": "yes" } },
        "stringData": { "token": token },
    });
    Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
    )
    .create(&PostParams::default(), &serde_json::from_value(secret)?)
    .await?;
    let recording = Recording::start(&ns, "")?;
    create_swap(&client, &ns, "broken", -1, Some("creds")).await?;
    let files = until_recorded(&recording, 1).await?;
    let text = std::fs::read_to_string(&files[0])?;
    assert!(text.contains("\"import\":\"get\"") && text.contains("\"name\":\"creds\""), "the Secret was read: {text}");
    let encoded = serde_json::to_string(&k8s_openapi::ByteString(token.as_bytes().to_vec()))?;
    let encoded = encoded.trim_matches('"');
    assert!(!text.contains(token), "{text}");
    assert!(!text.contains(encoded), "{text}");
    // The record still replays bit-exact: the plugin only counts the Secret's keys.
    let same = replay(&files[0], &[Path::new("--module"), &plugin("fixture-record")])?;
    assert!(same.status.success(), "{}", String::from_utf8_lossy(&same.stderr));
    Ok(())
}

#[tokio::test]
async fn the_record_directory_stays_within_its_budget_under_a_burst() -> anyhow::Result<()> {
    let (client, ns) = setup("record-budget").await?;
    // Every reconcile recorded; records of about 2-3 KiB in a budget of 1 MiB.
    let recording = Recording::start(&ns, "    record: { sample: 1.0, maxRecordKiB: 16, budgetMiB: 1 }\n")?;
    let burst = 1000;
    let swaps = swaps(&client, &ns);
    futures::future::try_join_all((0..burst).map(|i| {
        let (client, ns) = (client.clone(), ns.clone());
        async move { create_swap(&client, &ns, &format!("s{i}"), i, None).await }
    }))
    .await?;
    // Every Swap reconciled, so every reconcile was recorded (or its record deleted for room).
    until(
        "every Swap's status",
        async || Ok(swaps.list(&Default::default()).await?.items),
        |items| items.iter().filter(|s| s.data["status"]["result"].is_i64()).count() == burst as usize,
    )
    .await?;
    let written = until(
        "every reconcile's record written",
        async || Ok(recording.metric("wasmop_records_written_total").await),
        |n| *n >= burst as u64,
    )
    .await?;
    let files = recording.files();
    let total: u64 = files.iter().map(|f| f.metadata().map_or(0, |m| m.len())).sum();
    assert!(total <= 1 << 20, "{total} bytes in {} records", files.len());
    let deleted = recording.metric("wasmop_records_deleted_total").await;
    assert_eq!(written - deleted, files.len() as u64, "written {written}, deleted {deleted}");
    assert!(deleted > 0, "the burst's records do not fit the budget: none was deleted");
    Ok(())
}

/// Without a cluster: a reconcile recorded through the runtime replays bit-exact with the same
/// module (its clock and random readings answered from the record), and a record whose calls
/// were changed names the first that differs.
#[tokio::test]
async fn a_recorded_call_replays_bit_exact_and_a_changed_record_names_the_divergent_call() -> anyhow::Result<()> {
    use std::sync::Arc;
    use wasmop::record::Recorded;
    use wasmop::runtime::{CacheReader, Limits};
    use wasmop_core::record::format::{FORMAT_VERSION, Plugin, PrimaryName, Reason, Record};

    let module = wasmop_tests::runtime(Limits::default())?.load(&plugin("fixture-record"))?;
    let view: Arc<dyn CacheReader> = Arc::new(Recorded::new(Arc::new(wasmop_tests::EmptyCache)));
    let swap = json!({ "metadata": { "name": "s", "namespace": "ns", "annotations": { "test.wasmop.dev/secret": "x" } },
        "spec": { "value": -2 } });
    let result = module.reconcile(view.clone(), &wasmop_tests::first_request(&swap)).await?;
    assert!(result.is_err(), "v1 fails for a negative value");
    let steps = view.recorder().unwrap().take_steps();
    let imports: Vec<&str> = steps[0].calls.iter().map(|c| c.import.name()).collect();
    assert!(imports.contains(&"wall-clock") && imports.contains(&"get") && imports.contains(&"log"), "{imports:?}");
    let record = Record {
        version: FORMAT_VERSION,
        recorded_at: "2026-11-26T07:00:00Z".into(),
        reason: Reason::Failed,
        plugin: Plugin {
            name: "fixture-record".into(),
            digest: format!("sha256:{}", module.digest()),
            settings: json!({}),
        },
        primary: PrimaryName { namespace: Some("ns".into()), name: "s".into() },
        redacted: false,
        truncated: false,
        steps,
    };
    let record: &'static Record = Box::leak(Box::new(record));
    assert_eq!(wasmop::replay::exact(&module, record).await, Ok(()));
    for _ in 0..3 {
        // Bit-exact every time: nothing of the replaying host leaks in.
        assert_eq!(wasmop::replay::exact(&module, record).await, Ok(()));
    }
    let mut changed = record.clone();
    let get = changed.steps[0].calls.iter_mut().find(|c| c.import.name() == "get").unwrap();
    if let wasmop_core::record::Import::Get { name, .. } = &mut get.import {
        *name = "other".into();
    }
    let changed: &'static Record = Box::leak(Box::new(changed));
    let error = wasmop::replay::exact(&module, changed).await.unwrap_err().to_string();
    assert!(
        error.contains("the record has `get v1/Secret ns/other`, the guest called `get v1/Secret ns/x`"),
        "{error}"
    );
    Ok(())
}

/// The `dnsrecord` sample's reconciles, every one recorded: the `apply-external` step holds the
/// POST to the DNS service with the answer, without the bearer token the host added from a
/// Secret, and the deletion's `delete-external` step its DELETE; both records replay bit-exact
/// with the service stopped (nothing listens on its port, and it was sent nothing more), and a
/// record whose request was changed names the HTTP call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_dependents_http_is_recorded_and_replays_bit_exact_without_the_service() -> anyhow::Result<()> {
    use wasmop_tests::records::{ADDRESS, Records};

    const TOKEN: &str = "s3cret-dns-token-for-records";
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/dnsrecord/crd.yaml"), None).await?;
    let ns = namespace(&client, "record-http").await?;
    let token = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "dns-api-token" },
        "stringData": { "token": TOKEN } });
    let secrets = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &secrets)
        .create(&PostParams::default(), &serde_json::from_value(token)?)
        .await?;
    let (records, serving) = Records::serving(TOKEN).map_err(anyhow::Error::msg)?;
    let config = "plugins:\n  dnsrecord:\n    record: { sample: 1.0 }\n    \
                  allowedSecrets: [{ name: dns-api-token }, { name: dns-webhook-token }]\n    \
                  allowPlainHttpSecrets: [\"http://127.0.0.1:18053\"]\n";
    let recording = Recording::start_plugin("dnsrecord", &ns, Some(config))?;
    let dns = custom(&client, &ns, "sample.wasmop.dev", "DnsRecord", "dnsrecords");
    let www = json!({ "apiVersion": "sample.wasmop.dev/v1", "kind": "DnsRecord", "metadata": { "name": "www" },
        "spec": { "zone": ns, "name": "www", "type": "A", "value": "10.0.0.1" } });
    dns.create(&PostParams::default(), &serde_json::from_value(www)?).await?;
    let applied = recording.of_export("applyExternal").await?;
    let (text, file) = &applied[0];
    assert_eq!(records.zone(&ns).len(), 1, "the record was created once");
    // Deleting the DnsRecord deletes the DNS record through the finalizer: recorded too.
    dns.delete("www", &Default::default()).await?;
    let deleted = recording.of_export("deleteExternal").await?;
    assert!(records.zone(&ns).is_empty(), "the DNS record is deleted");
    let (deletion, deleted) = &deleted[0];
    assert!(deletion.contains(r#""import":"http","method":"DELETE""#), "{deletion}");
    let url = format!("http://{ADDRESS}/zones/{ns}/records");
    assert!(text.contains(r#""import":"http","method":"POST""#) && text.contains(&url), "{text}");
    assert!(text.contains(r#""answer":{"http":{"Ok":{"status":201"#), "the service's answer: {text}");
    assert!(!text.contains(TOKEN), "the host's secret header is not recorded: {text}");

    drop(recording);
    drop(serving);
    assert!(std::net::TcpStream::connect(ADDRESS).is_err(), "the service is stopped");
    let requests = records.requests();
    for record in [file, deleted] {
        let same = replay(record, &[Path::new("--module"), &plugin("dnsrecord")])?;
        let (stdout, stderr) = (String::from_utf8_lossy(&same.stdout), String::from_utf8_lossy(&same.stderr));
        assert!(same.status.success(), "{}: {stdout}{stderr}", record.display());
        assert_eq!(stdout, "bit-exact\n");
    }
    assert_eq!(records.requests(), requests, "the replays sent nothing");

    let changed = file.with_extension("changed");
    std::fs::write(&changed, text.replace(&url, &format!("{url}-moved")))?;
    let diverged = replay(&changed, &[Path::new("--module"), &plugin("dnsrecord")])?;
    let stderr = String::from_utf8_lossy(&diverged.stderr);
    assert_eq!(diverged.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("the record has `http POST {url}-moved`, the guest called `http POST {url}`")),
        "{stderr}"
    );
    Ok(())
}

/// A plugin reads what its projection names of its primaries, though the host's cache keeps
/// their status too (for its own writes): the greeting plugin projects `spec`, so the primary
/// its second reconcile is given has no status, while the API server's object has one by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projected_plugin_is_given_its_primary_without_the_status_it_does_not_read() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let ns = namespace(&client, "record-projection").await?;
    let config = "plugins:\n  greeting:\n    record: { sample: 1.0 }\n";
    let recording = Recording::start_plugin("greeting", &ns, Some(config))?;
    let greetings = custom(&client, &ns, "example.wasmop.dev", "Greeting", "greetings");
    let ada = json!({ "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting", "metadata": { "name": "ada" },
        "spec": { "name": "Ada" } });
    greetings.create(&PostParams::default(), &serde_json::from_value(ada)?).await?;
    let greeted = |g: &DynamicObject| g.data["status"]["message"] == "Hello, Ada!";
    until("the first status", async || Ok(greetings.get("ada").await?), greeted).await?;
    let patch = json!({ "spec": { "name": "Bea" } });
    greetings.patch("ada", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let objects = |records: &[(String, PathBuf)]| -> anyhow::Result<Vec<serde_json::Value>> {
        let mut objects = Vec::new();
        for (text, _) in records {
            let record: serde_json::Value = serde_json::from_str(text)?;
            let object = record["steps"][0]["request"]["object"].as_str().unwrap_or_default();
            objects.push(serde_json::from_str(object)?);
        }
        Ok(objects)
    };
    let second = until(
        "the second reconcile's record",
        async || objects(&recording.of_export("reconcile").await?),
        |objects| objects.iter().any(|o| o["spec"]["name"] == "Bea"),
    )
    .await?;
    let given = second.iter().find(|o| o["spec"]["name"] == "Bea").expect("awaited");
    assert_eq!(given["metadata"]["name"], "ada", "{given}");
    assert!(given.get("status").is_none(), "the plugin does not read the status: {given}");
    let now = greetings.get("ada").await?;
    assert!(now.data.get("status").is_some(), "the object has a status: {:?}", now.data);
    Ok(())
}

/// A `record` setting that cannot work refuses the plugin, in words, even on a host that does
/// not record.
#[tokio::test]
async fn a_record_setting_that_cannot_work_refuses_the_plugin() -> anyhow::Result<()> {
    let (client, ns) = setup("record-refused").await?;
    let yaml = "plugins:\n  fixture-record:\n    record: { sample: 1.5 }\n";
    let Err(error) = wasmop_tests::RunningHost::start_with_yaml(&client, &ns, &["fixture-record"], yaml) else {
        panic!("the plugin started");
    };
    let error = format!("{error:#}");
    assert!(error.contains("record.sample: 1.5 is not a fraction from 0 to 1"), "{error}");
    Ok(())
}
