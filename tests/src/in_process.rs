//! What the hosts running in this test process log, captured: the global tracing subscriber,
//! installed on first use, feeds the overlap detector ([`Overlaps`]) and the order of finished
//! runs ([`Runs`]), and writes the host's own log (`WASMOP_TEST_LOG`, default
//! `warn,wasmop=info,wasmop::plugin=warn`, without kube-client's line for every 5xx answer) to
//! the test's captured output, so a failing test shows what the host did.

use std::sync::{Arc, OnceLock};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Layer, SubscriberExt};

use crate::overlaps::Overlaps;
use crate::runs::Runs;

struct Captured {
    overlaps: Arc<Overlaps>,
    runs: Arc<Runs>,
}

fn captured() -> &'static Captured {
    static GLOBAL: OnceLock<Captured> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let captured = Captured { overlaps: Arc::default(), runs: Arc::default() };
        let filter = EnvFilter::try_from_env("WASMOP_TEST_LOG").unwrap_or_else(|_| {
            EnvFilter::new("warn,wasmop=info,wasmop::plugin=warn,kube_client::client::builder=off")
        });
        let log = tracing_subscriber::fmt::layer().with_test_writer().with_filter(filter);
        let subscriber = tracing_subscriber::registry()
            .with(crate::overlaps::Capture(captured.overlaps.clone()))
            .with(crate::runs::Capture(captured.runs.clone()))
            .with(log);
        tracing::subscriber::set_global_default(subscriber).expect("no other global tracing subscriber");
        captured
    })
}

/// The overlap detector fed by this process's hosts.
pub fn overlaps() -> Arc<Overlaps> {
    captured().overlaps.clone()
}

/// The order of the runs this process's hosts finished.
pub fn runs() -> Arc<Runs> {
    captured().runs.clone()
}
