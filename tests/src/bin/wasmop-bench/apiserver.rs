//! What a controller cost the API server, by the API server's own count
//! (`apiserver_request_total` on its `/metrics`): the write requests it served on the Greetings
//! of the controller's API group (each side reconciles a copy of the resource in a group of its
//! own, [`super::process::Side::group`]), and on Events if the controller records them. Read
//! before and after a phase, the difference less the load generator's own writes is that
//! controller's, even while other controllers work on other groups.

use kube::Client;

/// The counted writes of one controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The API group of its Greetings.
    pub group: &'static str,
    /// Whether its Event writes count too: only for a controller that records Events, alone
    /// among the phase's controllers in doing so (Events have no group of their own).
    pub events: bool,
}

/// Write requests (create, update, patch, apply, delete) the API server has served on the
/// [`Counted`] resources since it started.
pub async fn writes(client: &Client, counted: Counted) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(writes_in(&client.request_text(request).await?, counted))
}

/// [`writes`] once the count holds still for a quarter of a second (for up to 5 s): the API
/// server counts a request when it has answered it, which can be after its watch event showed
/// a phase's last status.
pub async fn settled_writes(client: &Client, counted: Counted) -> anyhow::Result<f64> {
    let mut last = writes(client, counted).await?;
    for _ in 0..20 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let now = writes(client, counted).await?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(last)
}

/// What the API server has done since it started, of what part `scale` compares.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerCounts {
    /// Its own CPU seconds (`process_cpu_seconds_total`).
    pub cpu_seconds: f64,
    /// The LIST requests it served on one resource (pages, each one).
    pub lists: f64,
    /// The garbage collections Go started by itself (`go_gc_cycles_automatic_gc_cycles_total`):
    /// one costs seconds of CPU on a heap of gigabytes, so a window that holds one is dearer
    /// by it, whoever made the garbage.
    pub collections: f64,
}

impl std::ops::Sub for ServerCounts {
    type Output = Self;

    fn sub(self, before: Self) -> Self {
        Self {
            cpu_seconds: self.cpu_seconds - before.cpu_seconds,
            lists: self.lists - before.lists,
            collections: self.collections - before.collections,
        }
    }
}

/// The API server's [`ServerCounts`], its LISTs counted on `resource`.
pub async fn server_counts(client: &Client, resource: &str) -> anyhow::Result<ServerCounts> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(server_counts_in(&client.request_text(request).await?, resource))
}

/// Has the API server collect its garbage now: Go's `runtime.GC()`, which its
/// `/debug/pprof/heap?gc=1` runs before it answers (the profile itself is dropped). Go collects
/// by itself once its heap has grown by as much as it held after the last collection (a
/// gigabyte or two here), so a collection falls into whichever measured window crosses that
/// line, whoever made most of the garbage; collected just before, a window of a few seconds
/// rarely holds one ([`ServerCounts::collections`] tells).
async fn collect_garbage(client: &Client) -> anyhow::Result<()> {
    use http_body_util::BodyExt;
    let request = http::Request::get("/debug/pprof/heap?gc=1").body(kube::client::Body::from(Vec::new()))?;
    let response = client.send(request).await?;
    anyhow::ensure!(response.status().is_success(), "the API server's heap profile: {}", response.status());
    response.into_body().collect().await.map_err(|err| anyhow::anyhow!("the API server's heap profile: {err}"))?;
    Ok(())
}

/// The API server's CPU below which it counts as quiet, in cores.
const QUIET_CORES: f64 = 0.1;
/// How long [`settle`] watches the API server's CPU at a time.
const QUIET_OVER: std::time::Duration = std::time::Duration::from_millis(500);
/// How long [`settle`] waits for quiet at most.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Returns once the API server has collected its garbage ([`collect_garbage`]) and then used
/// less than [`QUIET_CORES`] of CPU over [`QUIET_OVER`] (or after [`SETTLE_LIMIT`]): a measured
/// window starts from a settled server, not amid the work an earlier one left it.
pub async fn settle(client: &Client) -> anyhow::Result<()> {
    collect_garbage(client).await?;
    let started = std::time::Instant::now();
    let mut before = server_counts(client, "").await?.cpu_seconds;
    while started.elapsed() < SETTLE_LIMIT {
        tokio::time::sleep(QUIET_OVER).await;
        let now = server_counts(client, "").await?.cpu_seconds;
        if quiet(now - before, QUIET_OVER) {
            return Ok(());
        }
        before = now;
    }
    Ok(())
}

/// Whether `cpu` seconds used over `over` make a quiet server.
fn quiet(cpu: f64, over: std::time::Duration) -> bool {
    cpu < QUIET_CORES * over.as_secs_f64()
}

/// [`server_counts`] from the text of `/metrics`.
fn server_counts_in(metrics: &str, resource: &str) -> ServerCounts {
    let value = |line: &str| line.rsplit_once(' ').and_then(|(_, v)| v.trim().parse::<f64>().ok());
    let single = |name: &str| {
        let prefix = format!("{name} ");
        metrics.lines().find(|l| l.starts_with(&prefix)).and_then(value).unwrap_or(0.0)
    };
    let resource = format!("resource=\"{resource}\"");
    let lists = metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("verb=\"LIST\"") && l.contains(&resource))
        .filter_map(value)
        .sum();
    ServerCounts {
        cpu_seconds: single("process_cpu_seconds_total"),
        lists,
        collections: single("go_gc_cycles_automatic_gc_cycles_total"),
    }
}

/// [`writes`] from the text of `/metrics`.
fn writes_in(metrics: &str, counted: Counted) -> f64 {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("apiserver_request_total{"))
        .filter_map(|rest| rest.rsplit_once("} "))
        .filter(|(labels, _)| {
            let label = |name: &str| {
                labels.split(',').find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
            };
            let write = matches!(label("verb"), Some("POST" | "PUT" | "PATCH" | "APPLY" | "DELETE"));
            let ours = match label("resource") {
                Some("greetings") => label("group") == Some(counted.group),
                Some("events") => counted.events,
                _ => false,
            };
            write && ours
        })
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_writes_on_the_controllers_resources_only() {
        let metrics = r#"# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.wasmop.dev",resource="greetings",scope="resource",subresource="status",verb="PATCH",version="v1"} 3001
apiserver_request_total{code="409",component="apiserver",dry_run="",group="example.wasmop.dev",resource="greetings",scope="resource",subresource="status",verb="PATCH",version="v1"} 12
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.wasmop.dev",resource="greetings",scope="namespace",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="PATCH",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.native.dev",resource="greetings",scope="resource",subresource="status",verb="PATCH",version="v1"} 2000
apiserver_request_totally{resource="greetings",verb="PATCH"} 100
"#;
        let wasmop = Counted { group: "example.wasmop.dev", events: true };
        assert_eq!(writes_in(metrics, wasmop), 3018.0);
        assert_eq!(writes_in(metrics, Counted { events: false, ..wasmop }), 3013.0);
        assert_eq!(writes_in(metrics, Counted { group: "example.native.dev", events: false }), 2000.0);
    }

    #[test]
    fn reads_the_servers_cpu_its_lists_of_one_resource_and_its_own_collections() {
        let metrics = r#"# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 812.5
go_gc_cycles_automatic_gc_cycles_total 315
go_gc_cycles_forced_gc_cycles_total 16
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 46
apiserver_request_total{code="410",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="namespace",subresource="",verb="LIST",version="v1"} 9
"#;
        let counts = server_counts_in(metrics, "configmaps");
        assert_eq!(counts, ServerCounts { cpu_seconds: 812.5, lists: 47.0, collections: 315.0 });
    }

    #[test]
    fn a_server_is_quiet_below_a_tenth_of_a_core() {
        let half_a_second = std::time::Duration::from_millis(500);
        assert!(quiet(0.04, half_a_second));
        assert!(!quiet(0.05, half_a_second));
        assert!(!quiet(0.6, half_a_second));
    }
}
