//! The test vectors in `core/vectors/`, which the Rust, Python and TypeScript SDKs all check
//! their implementations against.

/// The JSON file `name` under `core/vectors/`.
pub(crate) fn load(name: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
