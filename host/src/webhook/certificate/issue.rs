//! Issuing the host's own webhook certificates with `rcgen` (the rustls project's certificate
//! generator, already the test suite's; ring as the crypto provider, as everywhere in the host):
//! a CA valid [`CA_LIFE`], a serving certificate it signs valid [`LEAF_LIFE`], each renewed
//! once two thirds of its life have passed ([`due`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// How long the CA is valid.
pub const CA_LIFE: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long a serving certificate is valid.
pub const LEAF_LIFE: Duration = Duration::from_secs(90 * 24 * 3600);

/// How far back a certificate's validity starts, for clocks a little behind.
const BACKDATE: Duration = Duration::from_secs(3600);

/// The CA's name; the serving certificates it signs name it as their issuer.
const CA_NAME: &str = "wasmop webhook CA";

/// Why a certificate cannot be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// rcgen refused (a key that does not parse, a name that is not a DNS name or address).
    #[error("cannot issue the webhook certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// The clock is out of the range of a certificate's dates.
    #[error("cannot issue the webhook certificate: {0} s since the epoch is no certificate date")]
    Clock(u64),
}

/// A certificate (PEM), its key (PEM) and its validity, in seconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// Valid from.
    pub not_before: u64,
    /// Valid until.
    pub not_after: u64,
}

/// Seconds since the epoch now.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Whether a certificate valid from `not_before` to `not_after` is due for renewal at `now`:
/// two thirds of its life have passed.
pub fn due(not_before: u64, not_after: u64, now: u64) -> bool {
    let life = not_after.saturating_sub(not_before);
    now >= not_before + life / 3 * 2
}

fn validity(params: &mut CertificateParams, now: u64, life: Duration) -> Result<(u64, u64), IssueError> {
    let not_before = now.saturating_sub(BACKDATE.as_secs());
    let not_after = now + life.as_secs();
    let at = |secs: u64| {
        let signed = i64::try_from(secs).map_err(|_| IssueError::Clock(secs))?;
        time::OffsetDateTime::from_unix_timestamp(signed).map_err(|_| IssueError::Clock(secs))
    };
    params.not_before = at(not_before)?;
    params.not_after = at(not_after)?;
    Ok((not_before, not_after))
}

/// The CA's parameters: the same at every issue, so that a CA key read back signs as the CA.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, CA_NAME);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

/// A new CA, valid [`CA_LIFE`] from `now`.
pub fn ca(now: u64) -> Result<Issued, IssueError> {
    let key = KeyPair::generate()?;
    let mut params = ca_params();
    let (not_before, not_after) = validity(&mut params, now, CA_LIFE)?;
    let cert = params.self_signed(&key)?;
    Ok(Issued { cert: cert.pem(), key: key.serialize_pem(), not_before, not_after })
}

/// A serving certificate for `names` (DNS names or IP addresses) signed by the CA whose key is
/// `ca_key` (PEM), valid [`LEAF_LIFE`] from `now`.
pub fn leaf(ca_key: &str, names: &[String], now: u64) -> Result<Issued, IssueError> {
    let issuer = Issuer::new(ca_params(), KeyPair::from_pem(ca_key)?);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, names.first().map_or("wasmop-webhook", String::as_str));
    params.distinguished_name = name;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.use_authority_key_identifier_extension = true;
    let (not_before, not_after) = validity(&mut params, now, LEAF_LIFE)?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Issued { cert: cert.pem(), key: key.serialize_pem(), not_before, not_after })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_due_at_two_thirds_of_the_life() {
        assert!(!due(0, 90, 59));
        assert!(due(0, 90, 60));
        assert!(due(0, 90, 100));
    }

    #[test]
    fn a_leaf_signed_by_a_ca_read_back_is_served() {
        let now = now();
        let ca = ca(now).unwrap();
        let leaf = leaf(&ca.key, &["127.0.0.1".into(), "hooks.wasmop.svc".into()], now).unwrap();
        assert_eq!(leaf.not_after, now + LEAF_LIFE.as_secs());
        super::super::serving::certified(leaf.cert.as_bytes(), leaf.key.as_bytes()).unwrap();
        // The CA, as a client trusts it, verifies the leaf.
        use tokio_rustls::rustls::client::danger::ServerCertVerifier as _;
        use tokio_rustls::rustls::pki_types::pem::PemObject as _;
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        roots
            .add(tokio_rustls::rustls::pki_types::CertificateDer::from_pem_slice(ca.cert.as_bytes()).unwrap())
            .unwrap();
        let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let verifier =
            tokio_rustls::rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .unwrap();
        let end = tokio_rustls::rustls::pki_types::CertificateDer::from_pem_slice(leaf.cert.as_bytes()).unwrap();
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from("hooks.wasmop.svc").unwrap();
        let at = tokio_rustls::rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(now));
        verifier.verify_server_cert(&end, &[], &name, &[], at).unwrap();
    }
}
