//! The host's configuration file as the book shows it (`docs/examples/wasmop.yaml`): the host
//! reads it (unknown keys are refused), and it gives every override a plugin takes, so a renamed
//! or dropped key fails here before the book tells users a word the host does not know.

use wasmop::settings::HostConfig;
use wasmop_tests::workspace_root;

/// Every key of a plugin's overrides, as users write them.
const EVERY_KEY: [&str; 18] = [
    "namespace",
    "labelSelector",
    "fieldSelector",
    "generationAware",
    "filters",
    "retry",
    "maxReconcileIntervalMs",
    "rateLimit",
    "maxConcurrentReconciles",
    "resyncPeriodMs",
    "limits",
    "serviceAccount",
    "cache",
    "sharding",
    "record",
    "allowedSecrets",
    "allowPlainHttpSecrets",
    "allowSecretWatches",
];

#[test]
fn the_books_configuration_file_is_read_by_the_host_and_sets_every_override() -> anyhow::Result<()> {
    let config = HostConfig::read(&workspace_root().join("docs/examples/wasmop.yaml"))?;
    let webpage = config.plugins.get("webpage").expect("the example configures the webpage plugin");
    let given = serde_json::to_value(webpage)?;
    let given = given.as_object().expect("settings are an object");
    for key in EVERY_KEY {
        assert!(given.contains_key(key), "the example lacks {key}: {given:?}");
    }
    assert_eq!(given["retry"]["maxAttempts"], 5);
    assert_eq!(given["limits"]["deadlineMs"], 5000);
    assert_eq!(given["filters"]["onLabelChange"], false);
    assert_eq!(given["record"]["selector"], "team=web");
    assert_eq!(given.len(), EVERY_KEY.len(), "one key per override, and no other: {given:?}");
    Ok(())
}
