//! Certificates the host manages itself: a CA and a serving certificate kept in a Secret of the
//! host's namespace (`--webhook-secret`), made by the first replica that finds none and shared
//! by every replica (a replica that loses the race to create it reads the winner's). Every
//! replica reads the Secret again every [`RECHECK`], and renews what is due
//! ([`issue::due`]): the serving certificate, signed by the same CA, or the CA itself, whose
//! bundle then holds the old CA beside the new one until the old one expires, so that a replica
//! still serving a certificate of the old CA stays trusted. A change of the Secret is a replace
//! at the resourceVersion read: of two replicas renewing at once, one wins and the other reads
//! its certificates.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use super::issue::{self, IssueError, Issued};

/// How often every replica reads the Secret again (and renews what is due).
pub const RECHECK: Duration = Duration::from_secs(300);

/// The keys of the Secret.
const CA_BUNDLE: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";

/// The annotations keeping the validity of what the Secret holds and the names served.
const CA_VALIDITY: &str = "wasmop.dev/ca-validity";
const CERT_VALIDITY: &str = "wasmop.dev/cert-validity";
const NAMES: &str = "wasmop.dev/cert-names";

/// How many times a replica reads the Secret again after losing a race to write it.
const ATTEMPTS: usize = 5;

/// Where the host keeps its certificates, and the names it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Managed {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The serving certificate's names (DNS names or IP addresses).
    pub names: Vec<String>,
}

/// What the Secret holds: the CA bundle the API server trusts, and the serving certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The CA bundle (PEM): the CA, and the one before it while it is valid.
    pub bundle: String,
    /// The serving certificate (PEM).
    pub cert: String,
    /// Its private key (PEM).
    pub key: String,
}

/// Why the certificates cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    /// The Secret cannot be read or written.
    #[error("cannot read or write the webhook certificates' Secret {namespace}/{name}: {source}")]
    Api {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The Secret holds something else than what the host writes.
    #[error("the Secret {namespace}/{name} holds no webhook certificates of this host: {why}")]
    Foreign {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// What is missing.
        why: String,
    },
    /// Certificates cannot be issued.
    #[error(transparent)]
    Issue(#[from] IssueError),
    /// Other replicas kept changing the Secret.
    #[error("the Secret {namespace}/{name} kept changing while this replica renewed it")]
    Contended {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
    },
}

/// The Secret's contents, as read.
struct Stored {
    bundle: String,
    ca: Issued,
    cert: Issued,
    names: Vec<String>,
}

impl Managed {
    /// The certificates in the Secret, made or renewed first when none are there or some are due.
    pub async fn ensure(&self, client: &kube::Client) -> Result<Held, ManagedError> {
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        let failed = |source| ManagedError::Api { namespace: self.namespace.clone(), name: self.name.clone(), source };
        for _ in 0..ATTEMPTS {
            let now = issue::now();
            let Some(secret) = api.get_opt(&self.name).await.map_err(failed)? else {
                let ca = issue::ca(now)?;
                let cert = issue::leaf(&ca.key, &self.names, now)?;
                let stored = Stored { bundle: ca.cert.clone(), ca, cert, names: self.names.clone() };
                match api.create(&PostParams::default(), &self.secret(&stored, None)).await {
                    Ok(_) => {
                        tracing::info!(namespace = self.namespace, name = self.name, "webhook certificates created");
                        return Ok(stored.held());
                    }
                    // Another replica created it first: its certificates are the ones.
                    Err(kube::Error::Api(status)) if status.code == 409 => continue,
                    Err(err) => return Err(failed(err)),
                }
            };
            let stored = self.read(&secret)?;
            let Some(renewed) = self.renewed(&stored, now)? else { return Ok(stored.held()) };
            let version = secret.metadata.resource_version.clone();
            match api.replace(&self.name, &PostParams::default(), &self.secret(&renewed, version)).await {
                Ok(_) => {
                    tracing::info!(namespace = self.namespace, name = self.name, "webhook certificates renewed");
                    return Ok(renewed.held());
                }
                // Another replica renewed it first: read its certificates.
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(err) => return Err(failed(err)),
            }
        }
        Err(ManagedError::Contended { namespace: self.namespace.clone(), name: self.name.clone() })
    }

    /// What `stored` becomes at `now`: `None` when nothing is due.
    fn renewed(&self, stored: &Stored, now: u64) -> Result<Option<Stored>, IssueError> {
        let mut names = stored.names.clone();
        let missing: Vec<&String> = self.names.iter().filter(|n| !names.contains(n)).collect();
        let ca_due = issue::due(stored.ca.not_before, stored.ca.not_after, now);
        let cert_due = issue::due(stored.cert.not_before, stored.cert.not_after, now);
        if missing.is_empty() && !ca_due && !cert_due {
            return Ok(None);
        }
        // Every replica's names: one started with other names adds its own, drops none.
        names.extend(missing.into_iter().cloned());
        let (ca, bundle) = if ca_due {
            let ca = issue::ca(now)?;
            let bundle = format!("{}{}", ca.cert, stored.ca.cert);
            (ca, bundle)
        } else {
            (stored.ca.clone(), stored.ca.cert.clone())
        };
        let cert = issue::leaf(&ca.key, &names, now)?;
        Ok(Some(Stored { bundle, ca, cert, names }))
    }

    /// The Secret holding `stored`, to be written at `version` (`None`: created).
    fn secret(&self, stored: &Stored, version: Option<String>) -> Secret {
        let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
        let validity = |issued: &Issued| format!("{}-{}", issued.not_before, issued.not_after);
        Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: version,
                labels: Some(BTreeMap::from([("app.kubernetes.io/managed-by".to_string(), "wasmop".to_string())])),
                annotations: Some(BTreeMap::from([
                    (CA_VALIDITY.to_string(), validity(&stored.ca)),
                    (CERT_VALIDITY.to_string(), validity(&stored.cert)),
                    (NAMES.to_string(), stored.names.join(",")),
                ])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                (CA_BUNDLE.to_string(), bytes(&stored.bundle)),
                (CA_KEY.to_string(), bytes(&stored.ca.key)),
                (CERT.to_string(), bytes(&stored.cert.cert)),
                (KEY.to_string(), bytes(&stored.cert.key)),
            ])),
            ..Secret::default()
        }
    }

    /// What `secret` holds.
    fn read(&self, secret: &Secret) -> Result<Stored, ManagedError> {
        let foreign =
            |why: String| ManagedError::Foreign { namespace: self.namespace.clone(), name: self.name.clone(), why };
        let data = secret.data.clone().unwrap_or_default();
        let text = |key: &str| {
            let bytes = data.get(key).ok_or_else(|| foreign(format!("no key {key}")))?;
            String::from_utf8(bytes.0.clone()).map_err(|_| foreign(format!("{key} is not PEM")))
        };
        let annotations = secret.metadata.annotations.clone().unwrap_or_default();
        let validity = |key: &str| {
            let value = annotations.get(key).ok_or_else(|| foreign(format!("no annotation {key}")))?;
            let (from, until) = value.split_once('-').ok_or_else(|| foreign(format!("{key} is not FROM-UNTIL")))?;
            let parse = |n: &str| n.parse::<u64>().map_err(|_| foreign(format!("{key} is not FROM-UNTIL")));
            Ok::<_, ManagedError>((parse(from)?, parse(until)?))
        };
        let (ca_from, ca_until) = validity(CA_VALIDITY)?;
        let (cert_from, cert_until) = validity(CERT_VALIDITY)?;
        let bundle = text(CA_BUNDLE)?;
        // The CA is the bundle's first certificate.
        let ca_cert = first_certificate(&bundle).to_string();
        Ok(Stored {
            ca: Issued { cert: ca_cert, key: text(CA_KEY)?, not_before: ca_from, not_after: ca_until },
            cert: Issued { cert: text(CERT)?, key: text(KEY)?, not_before: cert_from, not_after: cert_until },
            bundle,
            names: annotations.get(NAMES).map(|n| n.split(',').map(str::to_string).collect()).unwrap_or_default(),
        })
    }
}

/// The first certificate of a PEM `bundle`, with its line end.
fn first_certificate(bundle: &str) -> &str {
    const END: &str = "-----END CERTIFICATE-----";
    let Some(at) = bundle.find(END) else { return bundle };
    let rest = &bundle[at + END.len()..];
    let line_end = rest.len() - rest.trim_start_matches(['\r', '\n']).len();
    &bundle[..at + END.len() + line_end]
}

impl Stored {
    fn held(&self) -> Held {
        Held { bundle: self.bundle.clone(), cert: self.cert.cert.clone(), key: self.cert.key.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managed(names: &[&str]) -> Managed {
        Managed {
            namespace: "wasmop".into(),
            name: "wasmop-webhook-certs".into(),
            names: names.iter().map(|n| (*n).to_string()).collect(),
        }
    }

    fn stored(now: u64) -> Stored {
        let ca = issue::ca(now).unwrap();
        let cert = issue::leaf(&ca.key, &["127.0.0.1".into()], now).unwrap();
        Stored { bundle: ca.cert.clone(), ca, cert, names: vec!["127.0.0.1".into()] }
    }

    #[test]
    fn what_the_secret_holds_reads_back() {
        let managed = managed(&["127.0.0.1"]);
        let now = issue::now();
        let written = stored(now);
        let read = managed.read(&managed.secret(&written, None)).unwrap();
        assert_eq!(read.held(), written.held());
        assert_eq!(
            (&read.ca.key, read.cert.not_after, &read.names),
            (&written.ca.key, written.cert.not_after, &written.names)
        );
        assert!(managed.renewed(&read_back(&managed, &written), now).unwrap().is_none(), "nothing is due yet");
    }

    fn read_back(managed: &Managed, stored: &Stored) -> Stored {
        managed.read(&managed.secret(stored, None)).unwrap()
    }

    #[test]
    fn the_serving_certificate_is_renewed_at_two_thirds_of_its_life_by_the_same_ca() {
        let managed = managed(&["127.0.0.1"]);
        let now = issue::now();
        let stored = stored(now);
        let later = now + issue::LEAF_LIFE.as_secs() / 3 * 2 + 1;
        let renewed = managed.renewed(&stored, later).unwrap().expect("due");
        assert_eq!(renewed.bundle, stored.bundle, "the same CA");
        assert_ne!(renewed.cert.cert, stored.cert.cert);
        assert_eq!(renewed.cert.not_after, later + issue::LEAF_LIFE.as_secs());
    }

    #[test]
    fn a_renewed_ca_is_trusted_beside_the_old_one_and_new_names_are_added() {
        let managed = managed(&["hooks.wasmop.svc"]);
        let now = issue::now();
        let stored = stored(now);
        let renewed = managed.renewed(&stored, now).unwrap().expect("a name is missing");
        assert_eq!(renewed.names, vec!["127.0.0.1".to_string(), "hooks.wasmop.svc".to_string()]);
        let later = now + issue::CA_LIFE.as_secs() / 3 * 2 + 1;
        let renewed = managed.renewed(&renewed, later).unwrap().expect("due");
        assert!(renewed.bundle.ends_with(&stored.ca.cert) && renewed.bundle.len() > stored.ca.cert.len());
    }

    #[test]
    fn a_secret_of_something_else_is_refused() {
        let managed = managed(&["127.0.0.1"]);
        let secret = Secret { metadata: ObjectMeta::default(), ..Secret::default() };
        let err = managed.read(&secret).err().expect("refused");
        assert!(err.to_string().contains("holds no webhook certificates"), "{err}");
    }
}
