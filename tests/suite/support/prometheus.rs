//! A real Prometheus (the Debian package's `/usr/bin/prometheus`) for tests: started on a free
//! loopback port with a temporary config and data directory, queried through its HTTP API,
//! killed on drop.

use std::{
    io::{Read, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::wait_until;

/// `program` from `PATH` (see [`super::program`]; both come with Debian's `prometheus`).
pub fn tool(program: &str) -> Option<PathBuf> {
    super::program(program, "prometheus")
}

/// A running Prometheus scraping one target.
pub struct Prometheus {
    child: Child,
    /// `127.0.0.1:PORT` of its HTTP API.
    pub addr: String,
    /// Its config, data directory and log.
    pub dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl Prometheus {
    /// Starts `binary` scraping `target` (`host:port`, path `/metrics`) every `interval`,
    /// evaluating `rule_files`; returns once it is ready.
    pub fn start(binary: &Path, target: &str, interval: &str, rule_files: &[PathBuf]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let rules: Vec<String> = rule_files.iter().map(|p| format!("  - {:?}\n", p.display().to_string())).collect();
        let config = format!(
            "global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\nrule_files:\n{}\
             scrape_configs:\n  - job_name: spanset\n    static_configs:\n      - targets: [\"{target}\"]\n",
            rules.concat()
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("config written");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Command::new(binary)
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let mut me = Self { child, addr, dir };
        wait_until("prometheus ready", Duration::from_secs(60), || {
            if let Ok(Some(status)) = me.child.try_wait() {
                panic!("prometheus exited ({status}): {}", me.log());
            }
            get(&me.addr, "/-/ready").is_some_and(|(code, _)| code == 200)
        });
        me
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/query?query=…` now: the `data.result` array, or the error Prometheus gave.
    pub fn query(&self, promql: &str) -> Result<Vec<serde_json::Value>, String> {
        let q: String = url::form_urlencoded::byte_serialize(promql.as_bytes()).collect();
        let (code, body) = get(&self.addr, &format!("/api/v1/query?query={q}")).ok_or("no answer")?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{code}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{code}: {body}"));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// The first value of an instant query's result, if any.
    pub fn scalar(&self, promql: &str) -> Option<f64> {
        self.query(promql).ok()?.first()?["value"][1].as_str()?.parse().ok()
    }

    /// `GET path` of the HTTP API, parsed as JSON.
    pub fn api(&self, path: &str) -> Option<serde_json::Value> {
        get(&self.addr, path).and_then(|(_, b)| serde_json::from_str(&b).ok())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.0 GET: (status code, body).
pub fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}
