//! The timer source: re-enqueues every cached primary periodically, at background priority
//! (controller-runtime's SyncPeriod; JOSDK's TimerEventSource for the whole cache).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Sink;
use crate::object::ObjectKey;
use crate::scheduler::Priority;

/// Every `period` until `shutdown`, enqueues the keys `primaries` returns. The first round is
/// one period after the start: the initial list already reconciles everything.
pub async fn resync(
    period: Duration,
    primaries: impl Fn() -> Vec<ObjectKey> + Send,
    sink: &dyn Sink,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let keys = primaries();
        tracing::debug!(primaries = keys.len(), "resync");
        for key in keys {
            sink.enqueue(key, Priority::Background);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::source::testing::Recorder;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    #[tokio::test(start_paused = true)]
    async fn resync_enqueues_every_primary_each_period_in_the_background() {
        let sink = Arc::new(Recorder::default());
        let shutdown = CancellationToken::new();
        let task = {
            let (sink, shutdown) = (sink.clone(), shutdown.clone());
            tokio::spawn(
                async move { resync(Duration::from_secs(60), || vec![key("a"), key("b")], &*sink, shutdown).await },
            )
        };
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(sink.take().is_empty(), "nothing before the first period");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(sink.take(), [(key("a"), Priority::Background), (key("b"), Priority::Background)]);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(sink.take().len(), 2);
        shutdown.cancel();
        task.await.unwrap();
    }
}
