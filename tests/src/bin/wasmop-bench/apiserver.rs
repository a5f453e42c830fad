//! What a controller cost the API server, by the API server's own count
//! (`apiserver_request_total` on its `/metrics`): the write requests it served on the resources
//! a scenario touches. Read before and after a phase in which one controller works alone, the
//! difference less the load generator's own writes is that controller's, whichever side it is.

use kube::Client;

/// The resources whose writes are counted: the primaries and both Event APIs.
pub const RESOURCES: [&str; 2] = ["greetings", "events"];

/// Write requests (create, update, patch, apply, delete) the API server has served on
/// [`RESOURCES`] since it started.
pub async fn writes(client: &Client) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(writes_in(&client.request_text(request).await?))
}

/// [`writes`] from the text of `/metrics`.
fn writes_in(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("apiserver_request_total{"))
        .filter_map(|rest| rest.rsplit_once("} "))
        .filter(|(labels, _)| {
            let label = |name: &str| {
                labels.split(',').find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
            };
            let write = matches!(label("verb"), Some("POST" | "PUT" | "PATCH" | "APPLY" | "DELETE"));
            write && label("resource").is_some_and(|r| RESOURCES.contains(&r))
        })
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_writes_on_the_scenarios_resources_only() {
        let metrics = r#"# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.wasmop.dev",resource="greetings",scope="resource",subresource="status",verb="PATCH",version="v1"} 3001
apiserver_request_total{code="409",component="apiserver",dry_run="",group="example.wasmop.dev",resource="greetings",scope="resource",subresource="status",verb="PATCH",version="v1"} 12
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.wasmop.dev",resource="greetings",scope="namespace",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="PATCH",version="v1"} 7
apiserver_request_totally{resource="greetings",verb="PATCH"} 100
"#;
        assert_eq!(writes_in(metrics), 3018.0);
    }
}
