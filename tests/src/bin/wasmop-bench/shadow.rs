//! Part `shadow`: what a candidate costs. Two wasmop hosts run the greeting plugin, each on its
//! own Greetings: one alone ([`Side::Wasmop`]), one with the same module as its candidate
//! ([`Side::WasmopShadowed`], from its configuration file), so that every reconcile is run twice
//! and every comparison is equal. Both get `burst`'s creates and changes, then `paced`'s 100
//! changes a second, one host after the other ([`super::e2e`]). The report's runs give each host's CPU
//! seconds and change-to-status latencies, its table `wasmop shadowed / wasmop` their ratios;
//! the bounds are CPU at most 2x and an undelayed paced p99. A line per round gives the
//! shadowed host's comparisons (`wasmop_shadow_*`) against its reconciles: every one compared,
//! and all equal.

use std::fmt::Write as _;
use std::path::Path;

use kube::Client;

use super::e2e;
use super::process::Side;
use super::report::Run;

/// Ends the names of this part's scenarios, apart from `burst`'s.
const SUFFIX: &str = ", shadow part";

/// One round: the runs of both hosts, and a line on the shadowed host's comparisons.
pub async fn shadow(client: &Client, kubeconfig: &Path, round: usize) -> anyhow::Result<(Vec<Run>, String)> {
    let sides = super::sides::in_round_order(super::sides::chosen(&[Side::Wasmop, Side::WasmopShadowed]), round);
    let (mut runs, warm) = e2e::burst(client, kubeconfig, &sides, round, SUFFIX).await?;
    runs.extend(e2e::paced_in_turn(&warm).await?);
    let mut line = format!("round {round}:");
    for w in warm.iter().filter(|w| w.side() == Side::WasmopShadowed) {
        let metric = |name: &str| w.controller().metric(&format!("wasmop_shadow_{name}_total"));
        let (compared, differences, failures) = (metric("reconciles")?, metric("differences")?, metric("failures")?);
        let live = w.controller().metric("wasmop_reconciles_total")?;
        let _ = write!(
            line,
            " the shadowed host compared {compared:.0} of its {live:.0} reconciles: {differences:.0} differed, {failures:.0} candidate runs failed or were skipped"
        );
    }
    for w in warm {
        w.stop().await?;
    }
    Ok((runs, line))
}
