//! The certificates and keys of one cluster: a CA, the apiserver's serving certificate, an
//! administrator's client certificate in `system:masters` (what the kubeconfig carries, as
//! kubeadm's `admin.conf` does), and the key ServiceAccount tokens are signed with. Made fresh
//! for each cluster, so that no two clusters trust each other's clients.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};

use crate::{Result, io};

/// The PEM files of a cluster, written in its directory.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA's certificate: what clients verify the apiserver by and the apiserver verifies
    /// client certificates by.
    pub ca_cert: PathBuf,
    /// The CA's key (the controller-manager signs CSRs with it).
    pub ca_key: PathBuf,
    /// The apiserver's serving certificate.
    pub serving_cert: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
    /// The administrator's client certificate (`CN=kubernetes-admin`, `O=system:masters`).
    pub admin_cert: PathBuf,
    /// Its key.
    pub admin_key: PathBuf,
    /// The ServiceAccount token signing key.
    pub service_account_key: PathBuf,
    /// Its public half, which the apiserver verifies tokens with (it reads no public key out
    /// of a PKCS#8 private key).
    pub service_account_public: PathBuf,
}

/// The names the apiserver is reached by, in the cluster and from this machine.
const SERVING_NAMES: [&str; 5] =
    ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"];

impl Pki {
    /// Makes and writes a cluster's files in `dir`; `addresses` are the IPs the apiserver
    /// serves on (loopback and the `kubernetes` Service's address, at least).
    pub fn write(dir: &Path, cluster: &str, addresses: &[IpAddr]) -> Result<Self> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, format!("{cluster} CA"));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca.self_signed(&ca_key)?;

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(SERVING_NAMES.map(String::from).to_vec())?;
        serving.subject_alt_names.extend(addresses.iter().map(|ip| SanType::IpAddress(*ip)));
        serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &ca_cert, &ca_key)?;

        let admin_key = KeyPair::generate()?;
        let admin_cert = client(&admin_key, "kubernetes-admin", "system:masters", &ca_cert, &ca_key)?;

        let service_account_key = KeyPair::generate()?;

        let file = |name: &str, pem: String| -> Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, pem).map_err(io(format!("writing {}", path.display())))?;
            Ok(path)
        };
        Ok(Self {
            ca_cert: file("ca.crt", ca_cert.pem())?,
            ca_key: file("ca.key", ca_key.serialize_pem())?,
            serving_cert: file("apiserver.crt", serving_cert.pem())?,
            serving_key: file("apiserver.key", serving_key.serialize_pem())?,
            admin_cert: file("admin.crt", admin_cert.pem())?,
            admin_key: file("admin.key", admin_key.serialize_pem())?,
            service_account_key: file("service-account.key", service_account_key.serialize_pem())?,
            service_account_public: file("service-account.pub", service_account_key.public_key_pem())?,
        })
    }
}

/// A client certificate: Kubernetes takes the user from the common name and the groups from
/// the organizations.
fn client(key: &KeyPair, user: &str, group: &str, ca: &Certificate, ca_key: &KeyPair) -> Result<Certificate> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, user);
    params.distinguished_name.push(DnType::OrganizationName, group);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params.signed_by(key, ca, ca_key)?)
}
