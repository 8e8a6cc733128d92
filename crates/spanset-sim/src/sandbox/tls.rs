//! TLS for clusters that enforce authentication (kubectl (client-go) sends a bearer token
//! only over TLS, so `--auth` serves HTTPS) or ask for it (`--tls`). One throwaway CA per sandbox signs one server
//! certificate for `127.0.0.1` and `localhost`; the kubeconfig carries the CA so clients
//! verify the server as they would a real one.

use std::{net::IpAddr, sync::Arc};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A sandbox's CA and the server configuration its HTTPS listeners use.
#[derive(Clone)]
pub struct SandboxTls {
    /// The CA certificate, PEM (the kubeconfig's `certificate-authority-data`).
    pub ca_pem: String,
    /// rustls configuration of every HTTPS listener of the sandbox.
    pub server: Arc<rustls::ServerConfig>,
}

/// Why TLS could not be set up (no certificate, or rustls refused it).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a key or certificate failed.
    #[error("cannot generate the sandbox's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("cannot configure TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

impl SandboxTls {
    /// A new CA and a server certificate for loopback and the addresses `also` (the gateways
    /// where pods reach their cluster's API), valid for the sandbox's life.
    pub fn generate(also: &[IpAddr]) -> Result<Self, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "spanset sandbox CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca.self_signed(&ca_key)?;

        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params.subject_alt_names.push(SanType::IpAddress(IpAddr::from([127, 0, 0, 1])));
        params.subject_alt_names.extend(also.iter().map(|ip| SanType::IpAddress(*ip)));
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        let cert = params.signed_by(&key, &ca_cert, &ca_key)?;

        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut server =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()?
                .with_no_client_auth()
                .with_single_cert(chain, private)?;
        // HTTP/2 first, as kube-apiserver offers it: clients that speak it multiplex their
        // watches over one connection; the others (and upgrades) stay on HTTP/1.1.
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self { ca_pem: ca_cert.pem(), server: Arc::new(server) })
    }
}
