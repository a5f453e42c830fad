//! The greeting plugin under the FakeHost: the whole loop, by the host's rules.

use greeting::Greeter;
use wasmop_guest::serde_json::json;
use wasmop_guest::testing::FakeHost;

#[test]
fn greets_and_is_ready_for_the_current_generation() {
    let mut host = FakeHost::new();
    let greeting = json!({
        "metadata": { "name": "hi", "namespace": "default", "generation": 2 },
        "spec": { "name": "Ada" },
    });
    let stable = host.run_until_stable::<Greeter>(&greeting);
    assert_eq!(stable.status()["message"], "Hello, Ada!");
    assert_eq!(stable.status()["observedGeneration"], 2);
    let ready = stable.condition("Ready").expect("the host keeps Ready");
    assert_eq!(
        (&ready["status"], &ready["message"], &ready["observedGeneration"]),
        (&json!("True"), &json!("greeted"), &json!(2))
    );
    assert_eq!(stable.condition("Degraded").map(|c| &c["status"]), Some(&json!("False")));
    assert_eq!(stable.passes(), 2, "a second reconcile writes nothing");
}

#[test]
fn a_greeting_without_a_name_is_invalid_and_degraded() {
    let mut host = FakeHost::new();
    let stable =
        host.run_until_settled::<Greeter>(&json!({ "metadata": { "name": "hi", "namespace": "default" }, "spec": {} }));
    assert!(stable.last().result().is_err());
    let degraded = stable.condition("Degraded").expect("the host reports the failure");
    assert_eq!(degraded["status"], "True");
    assert!(
        degraded["message"].as_str().unwrap().contains("`spec.name`")
            || degraded["message"].as_str().unwrap().contains("name"),
        "{degraded}"
    );
    assert_eq!(stable.condition("Ready").map(|c| &c["reason"]), Some(&json!("InvalidResource")));
}
