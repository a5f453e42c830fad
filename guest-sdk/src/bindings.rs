//! The `wit_bindgen::generate!` call for the `wasmop:plugin` world in `wit/`.

wit_bindgen::generate!({
    path: "../wit",
    world: "plugin",
    pub_export_macro: true,
    default_bindings_module: "wasmop_guest::bindings",
    runtime_path: "wasmop_guest::wit_bindgen::rt",
});
