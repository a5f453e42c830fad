//! The `wit_bindgen::generate!` call for the `wasmop:plugin` world `operator` in `wit/`: every
//! plugin of the SDK exports the admission interface, which the host calls only for the webhooks
//! the plugin declares.

wit_bindgen::generate!({
    path: "../wit",
    world: "operator",
    pub_export_macro: true,
    default_bindings_module: "wasmop_guest::bindings",
    runtime_path: "wasmop_guest::wit_bindgen::rt",
});
