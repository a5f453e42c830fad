//! The cap on a module the loader takes from anywhere a resource names: a ConfigMap, a file, a
//! URL or an OCI registry. Nothing a resource names can make the host read without bound.

use std::io::Read;

/// The largest module the host fetches.
pub const MAX_MODULE_BYTES: usize = 64 << 20;

/// Why a module is refused for its size.
pub(super) fn too_large() -> String {
    format!("the module is larger than the {MAX_MODULE_BYTES} bytes allowed")
}

/// Reads `reader` to its end, failing as soon as it yields more than [`MAX_MODULE_BYTES`].
pub(super) fn read_capped(reader: impl Read) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    reader.take(MAX_MODULE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() > MAX_MODULE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_stops_past_the_cap() {
        assert_eq!(read_capped(std::io::repeat(0).take(1000)).unwrap().len(), 1000);
        let endless = read_capped(std::io::repeat(0)).unwrap_err();
        assert!(endless.contains("larger than"), "{endless}");
    }
}
