//! Where and how OTLP is sent, as its users configure it: `--otlp [URL]`,
//! `--otlp-header K=V`, and OpenTelemetry's own exporter variables, read
//! once when the command starts (the SDKs' and agents' names, so one
//! environment configures every exporter on a node):
//!
//! | variable | what it sets |
//! |---|---|
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | the base URL; `/v1/metrics` and `/v1/logs` are added |
//! | `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, `…_LOGS_ENDPOINT` | one signal's URL, used as it is |
//! | `OTEL_EXPORTER_OTLP_HEADERS` (and `…_METRICS_HEADERS`) | `key=value,…`, values percent-decoded |
//! | `OTEL_EXPORTER_OTLP_CERTIFICATE` (and `…_METRICS_…`) | a PEM file of the roots that sign the collector's certificate (else the system's) |
//! | `OTEL_EXPORTER_OTLP_COMPRESSION` (and `…_METRICS_…`) | `gzip` or `none` |
//! | `OTEL_EXPORTER_OTLP_TIMEOUT` (and `…_METRICS_…`) | milliseconds a request may take (10000) |
//!
//! A URL given with `--otlp` is the metrics endpoint as before (`/v1/metrics`
//! added where it is not there) and wins over the variables; a header given
//! with `--otlp-header` wins over one of the same name from them.

use std::path::PathBuf;
use std::time::Duration;

/// The default time a request may take (OpenTelemetry's: 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How the collector's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system's roots.
    System,
    /// The roots in a PEM file (`OTEL_EXPORTER_OTLP_CERTIFICATE`).
    File(PathBuf),
}

/// Everything a pusher needs to post, as plain values.
#[derive(Debug, Clone, PartialEq)]
pub struct Transport {
    pub metrics: Endpoint,
    pub logs: Endpoint,
    /// Sent with every request (`authorization`, …).
    pub headers: Vec<(String, String)>,
    pub roots: Roots,
    pub gzip: bool,
    pub timeout: Duration,
}

/// The transport from `--otlp` (`None`: not given; `Some(None)`: given
/// without a URL), `--otlp-header`s and the environment (`env`); `None`
/// where OTLP was not asked for. Bad values are said with the variable's
/// name.
pub fn transport(
    flag: Option<Option<Endpoint>>,
    flag_headers: &[(String, String)],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Transport>, String> {
    let Some(given) = flag else {
        return Ok(None);
    };
    // A signal's own variable before the general one.
    let var = |signal: &str, leaf: &str| {
        let own = format!("OTEL_EXPORTER_OTLP_{signal}_{leaf}");
        let all = format!("OTEL_EXPORTER_OTLP_{leaf}");
        env(&own)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (own, v))
            .or_else(|| env(&all).filter(|v| !v.trim().is_empty()).map(|v| (all, v)))
    };
    let said = |name: &str, e: String| format!("{name}: {e}");
    let base = env("OTEL_EXPORTER_OTLP_ENDPOINT").filter(|v| !v.trim().is_empty());
    let metrics = match given {
        Some(e) => e,
        None => match env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").filter(|v| !v.trim().is_empty()) {
            Some(url) => parse_exact(url.trim())
                .map_err(|e| said("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", e))?,
            None => match &base {
                Some(url) => parse_endpoint(url.trim())
                    .map_err(|e| said("OTEL_EXPORTER_OTLP_ENDPOINT", e))?,
                None => {
                    return Err("--otlp without a URL needs OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (or give one: --otlp http://127.0.0.1:4318)".into());
                }
            },
        },
    };
    let logs = match env("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT").filter(|v| !v.trim().is_empty()) {
        Some(url) => {
            parse_exact(url.trim()).map_err(|e| said("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", e))?
        }
        None => metrics.sibling("/v1/logs"),
    };
    let mut headers = match var("METRICS", "HEADERS") {
        Some((name, v)) => parse_headers(&v).map_err(|e| said(&name, e))?,
        None => Vec::new(),
    };
    for (k, v) in flag_headers {
        headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    let roots = match var("METRICS", "CERTIFICATE") {
        Some((_, path)) => Roots::File(PathBuf::from(path.trim())),
        None => Roots::System,
    };
    let gzip = match var("METRICS", "COMPRESSION") {
        None => false,
        Some((name, v)) => match v.trim() {
            "gzip" => true,
            "none" => false,
            other => return Err(format!("{name}: {other:?} is not gzip or none")),
        },
    };
    let timeout = match var("METRICS", "TIMEOUT") {
        None => DEFAULT_TIMEOUT,
        Some((name, v)) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            _ => {
                return Err(format!(
                    "{name}: {v:?} is not a number of milliseconds over 0"
                ));
            }
        },
    };
    Ok(Some(Transport {
        metrics,
        logs,
        headers,
        roots,
        gzip,
        timeout,
    }))
}

/// Where to post: an `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The whole URL posted to.
    pub url: String,
    pub(crate) tls: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) path: String,
}

impl Endpoint {
    /// The same collector's endpoint for another signal: `/v1/metrics`
    /// replaced by `path` (`/v1/logs`), else `path` added.
    pub fn sibling(&self, path: &str) -> Endpoint {
        let base = self.path.strip_suffix("/v1/metrics").unwrap_or(&self.path);
        let new = format!("{base}{path}");
        let url = format!("{}{new}", &self.url[..self.url.len() - self.path.len()]);
        Endpoint {
            url,
            path: new,
            ..self.clone()
        }
    }
}

/// `--otlp URL`: an endpoint (`/v1/metrics` added to a URL that does not
/// end in it, as an OTLP endpoint is given), or why not.
pub fn parse_endpoint(s: &str) -> Result<Endpoint, String> {
    parse_url(s, true)
}

/// A signal's own endpoint (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`): its
/// path used as it is.
pub fn parse_exact(s: &str) -> Result<Endpoint, String> {
    parse_url(s, false)
}

fn parse_url(s: &str, add_path: bool) -> Result<Endpoint, String> {
    let (tls, rest) = match s.split_once("://") {
        Some(("http", rest)) => (false, rest),
        Some(("https", rest)) => (true, rest),
        _ => return Err("an http:// or https:// URL, e.g. http://127.0.0.1:4318".into()),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(
            "no user or password in the URL: send credentials as a header (--otlp-header, OTEL_EXPORTER_OTLP_HEADERS)"
                .into(),
        );
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("{p:?} is not a port"))?;
            (h, port)
        }
        _ => (authority, if tls { 443 } else { 80 }),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("no host in the URL".into());
    }
    let path = path.trim_end_matches('/');
    let path = if !add_path || path.ends_with("/v1/metrics") {
        if path.is_empty() {
            "/".to_owned()
        } else {
            path.to_owned()
        }
    } else {
        format!("{path}/v1/metrics")
    };
    let shown = if authority.starts_with('[') || !host.contains(':') {
        authority.to_owned()
    } else {
        format!("[{host}]:{port}")
    };
    let scheme = if tls { "https" } else { "http" };
    Ok(Endpoint {
        url: format!("{scheme}://{shown}{path}"),
        tls,
        host: host.to_owned(),
        port,
        path,
    })
}

/// `--otlp-header K=V`: a header, or why not.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    {
        return Err(format!("{k:?} is not a header name"));
    }
    if v.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err(format!("the value of {k} has a line break"));
    }
    Ok((k.to_owned(), v.trim().to_owned()))
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs, comma-separated, each
/// value percent-decoded (W3C Baggage's form, as the specification says).
pub fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = parse_header(p)?;
            Ok((k, percent_decode(&v)?))
        })
        .collect()
}

/// `Bearer%20abc` → `Bearer abc`.
fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{s:?}: a % not followed by two hex digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn a_bare_otlp_is_configured_by_the_environment_alone() {
        let t = transport(
            Some(None),
            &[],
            env(&[
                (
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    "https://collector.example:4318",
                ),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "authorization=Bearer%20abc,x-team=ml",
                ),
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
                ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.metrics.url, "https://collector.example:4318/v1/metrics");
        assert_eq!(t.logs.url, "https://collector.example:4318/v1/logs");
        assert_eq!(
            t.headers,
            [
                ("authorization".into(), "Bearer abc".into()),
                ("x-team".into(), "ml".into())
            ]
        );
        assert_eq!(t.roots, Roots::File("/etc/ca.pem".into()));
        assert!(t.gzip);
        assert_eq!(t.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn a_signal_s_own_variables_and_the_flags_come_first() {
        let e = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://m:9000/custom",
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=old"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "none"),
        ]);
        let flag = [("Authorization".to_string(), "Bearer new".to_string())];
        let t = transport(Some(None), &flag, &e).unwrap().unwrap();
        // A signal's endpoint is used as it is.
        assert_eq!(t.metrics.url, "http://m:9000/custom");
        assert_eq!(t.logs.url, "http://m:9000/custom/v1/logs");
        assert_eq!(t.headers, [("Authorization".into(), "Bearer new".into())]);
        assert!(!t.gzip);
        assert_eq!(t.timeout, DEFAULT_TIMEOUT);
        // A URL on the command line wins.
        let given = super::parse_endpoint("http://127.0.0.1:4318").unwrap();
        let t = transport(Some(Some(given)), &[], &e).unwrap().unwrap();
        assert_eq!(t.metrics.url, "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(t.logs.url, "http://127.0.0.1:4318/v1/logs");
        assert!(transport(None, &[], &e).unwrap().is_none());
    }

    #[test]
    fn bad_values_are_said_with_their_variable() {
        let bad = |pairs: &[(&str, &str)]| transport(Some(None), &[], env(pairs)).unwrap_err();
        let e = bad(&[]);
        assert!(e.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{e}");
        let base = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        let e = bad(&[base, ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")]);
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_COMPRESSION: "), "{e}");
        let e = bad(&[base, ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")]);
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_TIMEOUT: "), "{e}");
        let e = bad(&[base, ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=a%2")]);
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_HEADERS: "), "{e}");
        let e = bad(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://c")]);
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT: "), "{e}");
        assert!(parse_header("no-equals").is_err());
        assert!(parse_header("bad name=x").is_err());
    }
}
