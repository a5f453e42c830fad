//! Fetches a module named by a `ReconcilerPlugin`: from a ConfigMap's `binaryData`, a file on
//! the host, or an https URL, checking its sha256 whenever one is given (always, for URLs).

use std::path::PathBuf;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The largest module the host fetches.
const MAX_MODULE_BYTES: usize = 64 << 20;

/// A ConfigMap key holding a module.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ConfigMapKey {
    /// The ConfigMap's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The key in its `binaryData`.
    pub key: String,
}

/// `spec.module` of a `ReconcilerPlugin`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSpec {
    /// A key of a ConfigMap's `binaryData`.
    pub config_map: Option<ConfigMapKey>,
    /// A path on the host.
    pub file: Option<PathBuf>,
    /// An https URL.
    pub url: Option<String>,
    /// The module's sha256, hex encoded.
    pub sha256: Option<String>,
}

/// Where a module is, once the spec is validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A ConfigMap key.
    ConfigMap(ConfigMapKey),
    /// A file on the host.
    File(PathBuf),
    /// An https URL.
    Url(String),
}

impl ModuleSpec {
    /// The one location the spec names, or why it is unusable.
    pub fn location(&self) -> Result<Location, String> {
        let given = [self.config_map.is_some(), self.file.is_some(), self.url.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err("spec.module needs exactly one of configMap, file and url".into());
        }
        if let Some(url) = &self.url {
            if !url.starts_with("https://") {
                return Err(format!("spec.module.url {url:?} must be an https URL"));
            }
            if self.sha256.is_none() {
                return Err("spec.module.url needs spec.module.sha256".into());
            }
            return Ok(Location::Url(url.clone()));
        }
        Ok(match (&self.config_map, &self.file) {
            (Some(key), _) => Location::ConfigMap(key.clone()),
            (_, Some(file)) => Location::File(file.clone()),
            _ => unreachable!("exactly one location is given"),
        })
    }

    /// The module's bytes, checked against `sha256` when given.
    pub async fn fetch(&self, client: &Client) -> Result<Vec<u8>, String> {
        let bytes = match self.location()? {
            Location::ConfigMap(key) => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &key.namespace);
                let map = api
                    .get_opt(&key.name)
                    .await
                    .map_err(|e| format!("cannot read ConfigMap {}/{}: {e}", key.namespace, key.name))?
                    .ok_or_else(|| format!("ConfigMap {}/{} does not exist", key.namespace, key.name))?;
                let data = map.binary_data.and_then(|mut d| d.remove(&key.key)).ok_or_else(|| {
                    format!("ConfigMap {}/{} has no binaryData key {:?}", key.namespace, key.name, key.key)
                })?;
                data.0
            }
            Location::File(path) => std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            Location::Url(url) => download(&url).await?,
        };
        if bytes.len() > MAX_MODULE_BYTES {
            return Err(format!("the module has {} bytes, more than the {MAX_MODULE_BYTES} allowed", bytes.len()));
        }
        if let Some(expected) = &self.sha256 {
            verify(&bytes, expected)?;
        }
        Ok(bytes)
    }
}

/// Downloads `url`.
async fn download(url: &str) -> Result<Vec<u8>, String> {
    let response = reqwest::get(url).await.map_err(|e| format!("cannot fetch {url}: {e}"))?;
    let response = response.error_for_status().map_err(|e| format!("cannot fetch {url}: {e}"))?;
    let bytes = response.bytes().await.map_err(|e| format!("cannot fetch {url}: {e}"))?;
    Ok(bytes.to_vec())
}

/// Checks that `bytes` have the sha256 `expected` (hex, any case).
pub fn verify(bytes: &[u8], expected: &str) -> Result<(), String> {
    let actual = hex::encode(Sha256::digest(bytes));
    if actual.eq_ignore_ascii_case(expected.trim()) {
        Ok(())
    } else {
        Err(format!("the module's sha256 is {actual}, not the expected {expected}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_location_and_urls_need_https_and_a_digest() {
        let none = ModuleSpec::default();
        assert!(none.location().unwrap_err().contains("exactly one"));
        let file = ModuleSpec { file: Some("/m.wasm".into()), ..ModuleSpec::default() };
        assert_eq!(file.location(), Ok(Location::File("/m.wasm".into())));
        let both = ModuleSpec { url: Some("https://x/m.wasm".into()), ..file.clone() };
        assert!(both.location().is_err());
        let plain = ModuleSpec { url: Some("http://x/m.wasm".into()), sha256: Some("ab".into()), ..Default::default() };
        assert!(plain.location().unwrap_err().contains("https"));
        let unpinned = ModuleSpec { url: Some("https://x/m.wasm".into()), ..Default::default() };
        assert!(unpinned.location().unwrap_err().contains("sha256"));
        let pinned = ModuleSpec { sha256: Some("ab".into()), ..unpinned };
        assert_eq!(pinned.location(), Ok(Location::Url("https://x/m.wasm".into())));
    }

    #[test]
    fn the_digest_must_match() {
        let digest = hex::encode(Sha256::digest(b"module"));
        assert_eq!(verify(b"module", &digest.to_uppercase()), Ok(()));
        assert!(verify(b"other", &digest).unwrap_err().contains("not the expected"));
    }
}
