//! `--web-config FILE`: the exporter's door, in the YAML format the
//! Prometheus exporters read (exporter-toolkit's "web configuration file"):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.pem          # relative paths are the file's folder's
//!   key_file: server-key.pem
//!   client_ca_file: ca.pem         # optional, with client_auth_type
//!   client_auth_type: RequireAndVerifyClientCert
//!   min_version: TLS12             # optional: TLS12 or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...         # bcrypt hashes
//! ```
//!
//! Everything in the file is checked when the exporter starts (files read,
//! certificate and key matched, every hash parsed), so a mistake is an
//! error before anything is sampled, not a refused scrape an hour later.
//! Keys the toolkit knows that flatline does not implement (`cipher_suites`,
//! `http_server_config`, ...) are refused by name rather than ignored.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

/// The file as written (exporter-toolkit's field names).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebFile {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_ca_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
}

/// A web configuration, checked and ready to serve with.
#[derive(Clone)]
pub struct Door {
    /// Where it was read from, for messages.
    pub file: PathBuf,
    /// TLS, when the file asks for it.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic auth, when the file lists users.
    pub auth: Option<Arc<BasicAuth>>,
    /// `client_auth_type`, when client certificates are asked for.
    pub client_certs: Option<String>,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("file", &self.file)
            .field("tls", &self.tls.is_some())
            .field("auth", &self.auth)
            .finish()
    }
}

impl Door {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the web config {}", path.display()))?;
        Self::parse(&text, path).with_context(|| format!("web config {}", path.display()))
    }

    /// Checks the text of a web config read from `path` (whose folder
    /// relative file names are taken from).
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        // An empty file is valid YAML for "nothing": plain HTTP, no users,
        // as the toolkit reads it.
        let file: WebFile = if text.trim().is_empty() {
            WebFile::default()
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| anyhow!("{e}"))?
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let client_certs = file
            .tls_server_config
            .as_ref()
            .and_then(|t| t.client_auth_type.clone())
            .filter(|t| t != "NoClientCert");
        let tls = file
            .tls_server_config
            .map(|t| tls_config(&t, dir).map(Arc::new))
            .transpose()
            .context("tls_server_config")?;
        let auth = match file.basic_auth_users {
            Some(users) if !users.is_empty() => {
                Some(Arc::new(BasicAuth::new(users).context("basic_auth_users")?))
            }
            _ => None,
        };
        Ok(Self {
            file: path.to_owned(),
            tls,
            auth,
            client_certs,
        })
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// What the door asks of a client, for the line that says where
    /// metrics are served: "TLS, basic auth", "TLS", ... or "open".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.tls.is_some() {
            parts.push("TLS".to_owned());
            if let Some(kind) = &self.client_certs {
                parts.push(format!("client certificates: {kind}"));
            }
        }
        if let Some(a) = &self.auth {
            parts.push(match a.users.len() {
                1 => "basic auth (1 user)".to_owned(),
                n => format!("basic auth ({n} users)"),
            });
        }
        if parts.is_empty() {
            "no TLS, no password".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// The rustls configuration a `tls_server_config` asks for.
fn tls_config(t: &TlsFile, dir: &Path) -> Result<rustls::ServerConfig> {
    let at = |p: &Path| dir.join(p);
    let (Some(cert), Some(key)) = (&t.cert_file, &t.key_file) else {
        bail!("cert_file and key_file are both required");
    };
    let (cert, key) = (at(cert), at(key));
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("cert_file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        bail!("cert_file {}: no certificate in it", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| anyhow!("key_file {}: {e}", key.display()))?;
    let versions = versions(t.min_version.as_deref(), t.max_version.as_deref())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| anyhow!("{e}"))?;
    let auth_type = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let builder = match (auth_type, &t.client_ca_file) {
        ("NoClientCert", None) => builder.with_no_client_auth(),
        ("NoClientCert", Some(_)) => bail!(
            "client_ca_file is given but client_auth_type is not: say RequireAndVerifyClientCert or VerifyClientCertIfGiven"
        ),
        ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven", None) => {
            bail!("client_auth_type {auth_type} needs a client_ca_file")
        }
        (kind @ ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven"), Some(ca)) => {
            let ca = at(ca);
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(&ca)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| anyhow!("client_ca_file {}: {e}", ca.display()))?;
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| anyhow!("client_ca_file {}: {e}", ca.display()))?;
            }
            if roots.is_empty() {
                bail!("client_ca_file {}: no certificate in it", ca.display());
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if kind == "VerifyClientCertIfGiven" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| anyhow!("{e}"))?)
        }
        (other, _) => bail!(
            "client_auth_type {other} is not supported (NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert)"
        ),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| anyhow!("the certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The protocol versions between `min` and `max` (TLS 1.2 and 1.3 when
/// neither is said; the toolkit's default minimum is TLS 1.2 as well).
fn versions(
    min: Option<&str>,
    max: Option<&str>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>> {
    let rank = |v: Option<&str>, default: u8, what: &str| -> Result<u8> {
        match v {
            None => Ok(default),
            Some("TLS12") => Ok(12),
            Some("TLS13") => Ok(13),
            Some(other) => bail!("{what} {other} is not supported (TLS12 or TLS13)"),
        }
    };
    let (lo, hi) = (rank(min, 12, "min_version")?, rank(max, 13, "max_version")?);
    let out: Vec<_> = [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
        .into_iter()
        .filter(|(r, _)| (lo..=hi).contains(r))
        .map(|(_, v)| v)
        .collect();
    if out.is_empty() {
        bail!("min_version is above max_version");
    }
    Ok(out)
}

/// Basic auth against bcrypt hashes.
///
/// bcrypt is slow on purpose (tens of milliseconds a check at cost 10), and
/// Prometheus sends the same password at every scrape: a password that
/// verified is remembered (in memory, beside its hash, as the toolkit does),
/// so a scrape costs a comparison, not a hash. A wrong one is hashed every
/// time, on the server's one blocking thread, so guessing cannot take more
/// than one core nor slow the scrapes of those who know the password.
pub struct BasicAuth {
    users: HashMap<String, String>,
    verified: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("users", &self.users.len())
            .finish()
    }
}

/// A hash (of cost 10, the usual) checked for an unknown user so that the
/// answer takes as long as for a known one; an unknown user never passes,
/// whatever this hash matches.
const NOBODY: &str = "$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy";

/// What a request's `Authorization` header is worth.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Let in.
    Pass,
    /// Refused at once (no header, not Basic, not base64, no colon).
    Refuse,
    /// Needs a bcrypt check: `(user, password, hash)`.
    Hash(String, String, String),
}

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> Result<Self> {
        for (user, hash) in &users {
            hash.parse::<bcrypt::HashParts>()
                .map_err(|e| anyhow!("{user}: not a bcrypt hash ({e})"))?;
        }
        Ok(Self {
            users: users.into_iter().collect(),
            verified: Mutex::default(),
        })
    }

    /// The first, cheap step: a header that cannot pass, one that passed
    /// before, or the bcrypt check still to do.
    pub fn check(&self, header: Option<&[u8]>) -> Check {
        let Some((user, password)) = header.and_then(credentials) else {
            return Check::Refuse;
        };
        let verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if verified
            .get(&user)
            .is_some_and(|known| same(known.as_bytes(), password.as_bytes()))
        {
            return Check::Pass;
        }
        let hash = self.users.get(&user).map_or(NOBODY, String::as_str);
        Check::Hash(user, password, hash.to_owned())
    }

    /// The slow step (run off the server's thread): true, and remembered,
    /// when `password` is the user's.
    pub fn verify(&self, user: &str, password: &str, hash: &str) -> bool {
        let known = self.users.contains_key(user);
        let ok = bcrypt::verify(password, hash).unwrap_or(false) && known;
        if ok {
            self.verified
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(user.to_owned(), password.to_owned());
        }
        ok
    }
}

/// `Basic base64(user:password)` → `(user, password)`.
fn credentials(header: &[u8]) -> Option<(String, String)> {
    let header = std::str::from_utf8(header).ok()?;
    let (scheme, value) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `flatline hash-password`: the first line of standard input (what a
/// pipe or a typed password gives) hashed for `basic_auth_users`.
pub fn hash_password_command(cost: u32) -> Result<()> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    let password = line.strip_suffix('\n').unwrap_or(&line);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        bail!(
            "no password on standard input (e.g. `read -rs P; echo \"$P\" | flatline hash-password`)"
        );
    }
    let hash = bcrypt::hash(password, cost).map_err(|e| anyhow!("hashing the password: {e}"))?;
    println!("{hash}");
    Ok(())
}

/// True for an address only this machine reaches.
pub fn is_loopback(addr: std::net::SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Door> {
        Door::parse(text, Path::new("/nonexistent/web.yml"))
    }

    fn header(user: &str, password: &str) -> Vec<u8> {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {b}").into_bytes()
    }

    #[test]
    fn an_empty_file_is_an_open_door_and_unknown_keys_are_named() {
        let d = parse("").unwrap();
        assert!(d.tls.is_none() && d.auth.is_none());
        assert_eq!(d.scheme(), "http");
        let e = format!(
            "{:#}",
            parse("http_server_config:\n  http2: true\n").unwrap_err()
        );
        assert!(e.contains("http_server_config"), "{e}");
        let e = format!(
            "{:#}",
            parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [x]\n")
                .unwrap_err()
        );
        assert!(e.contains("cipher_suites"), "{e}");
    }

    #[test]
    fn tls_needs_both_files_and_says_which_one_is_missing() {
        let e = format!(
            "{:#}",
            parse("tls_server_config:\n  cert_file: a.pem\n").unwrap_err()
        );
        assert!(e.contains("cert_file and key_file"), "{e}");
        let e = format!(
            "{:#}",
            parse("tls_server_config:\n  cert_file: a.pem\n  key_file: b.pem\n").unwrap_err()
        );
        // Relative to the config file's folder, named once.
        assert!(e.contains("/nonexistent/a.pem"), "{e}");
        assert_eq!(e.matches("a.pem").count(), 1, "{e}");
    }

    #[test]
    fn a_bad_hash_or_version_is_refused_at_start() {
        let e = format!(
            "{:#}",
            parse("basic_auth_users:\n  alice: plaintext\n").unwrap_err()
        );
        assert!(e.contains("alice: not a bcrypt hash"), "{e}");
        assert!(versions(Some("TLS13"), Some("TLS12")).is_err());
        assert!(versions(Some("TLS10"), None).is_err());
        assert_eq!(versions(Some("TLS13"), None).unwrap().len(), 1);
        assert_eq!(versions(None, None).unwrap().len(), 2);
    }

    #[test]
    fn the_right_password_passes_once_hashed_then_from_memory() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let d = parse(&format!("basic_auth_users:\n  prom: '{hash}'\n")).unwrap();
        let a = d.auth.unwrap();
        assert_eq!(a.check(None), Check::Refuse);
        assert_eq!(a.check(Some(b"Bearer abc")), Check::Refuse);
        assert_eq!(a.check(Some(b"Basic !!!")), Check::Refuse);
        // First time: a bcrypt check; a wrong password never passes.
        let Check::Hash(u, p, h) = a.check(Some(&header("prom", "wrong"))) else {
            panic!("a check to do")
        };
        assert!(!a.verify(&u, &p, &h));
        assert!(matches!(
            a.check(Some(&header("prom", "wrong"))),
            Check::Hash(..)
        ));
        let Check::Hash(u, p, h) = a.check(Some(&header("prom", "s3cret"))) else {
            panic!("a check to do")
        };
        assert!(a.verify(&u, &p, &h));
        // Then from memory, and only for that password.
        assert_eq!(a.check(Some(&header("prom", "s3cret"))), Check::Pass);
        assert!(matches!(
            a.check(Some(&header("prom", "s3cret!"))),
            Check::Hash(..)
        ));
        // An unknown user is checked against a hash nobody matches.
        let Check::Hash(u, p, h) = a.check(Some(&header("eve", "s3cret"))) else {
            panic!("a check to do")
        };
        assert_eq!(h, NOBODY);
        assert!(!a.verify(&u, &p, &h));
    }

    #[test]
    fn same_compares_whole_slices() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(same(b"", b""));
    }
}
