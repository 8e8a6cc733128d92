//! `spanset drill cluster-loss --report FILE.html` against the sandbox, the page then opened
//! in a real headless Chromium: it loads with nothing on its console, shows a lane per
//! ordinal coloured as its legend, the lost member's ordinals leaving and coming back, the
//! fault and every phase in the order they happened, and the verdict and figures the JSON
//! report gives; its screenshot is kept under target/ for a person to look at.

use crate::support;

use std::{collections::BTreeMap, path::Path, time::Instant};

use regex::Regex;
use spanset::cli::sandbox::example;
use support::{
    chromium::{Chromium, png_size},
    federation::{Controller, Federation},
};

/// One segment of a lane, as the page shows it.
#[derive(Debug)]
struct Shown {
    cluster: String,
    fill: String,
    x: f64,
}

/// The lanes of the DOM: ordinal → its segments in page order.
fn lanes(dom: &str) -> BTreeMap<u32, Vec<Shown>> {
    let segment = Regex::new(
        r#"<g class="segment[^"]*" data-cluster="([^"]*)"><rect class="run" x="([0-9.]+)" [^>]*fill="([^"]*)""#,
    )
    .unwrap();
    let mut out = BTreeMap::new();
    // Each lane's elements run until the next lane, or the marks drawn after the last one.
    let marks = dom.find(r#"<g class="mark"#).unwrap_or(dom.len());
    for block in dom[..marks].split(r#"<g class="lane" data-ordinal=""#).skip(1) {
        let ordinal: u32 = block[..block.find('"').unwrap()].parse().unwrap();
        let shown = segment
            .captures_iter(block)
            .map(|c| Shown { cluster: c[1].to_string(), x: c[2].parse().unwrap(), fill: c[3].to_string() })
            .collect();
        assert!(out.insert(ordinal, shown).is_none(), "ordinal {ordinal} has two lanes");
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_loss_report_opens_in_chromium_with_a_lane_per_ordinal_the_phases_and_the_verdict() {
    let Some(chromium) = Chromium::find() else { return };
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts = serde_json::to_value(example(&f.members)).unwrap();
    fsts["spec"]["failover"] = serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6});
    f.create(&serde_json::from_value(fsts).unwrap()).await;
    let thirds = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
    f.wait_settled("redis", &thirds, "initial slices").await;

    // Kept under target/ for a person to look at after the run.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("drill-report");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("cluster-loss.html");
    let _ = std::fs::remove_file(&page);
    let page_arg = page.display().to_string();
    let admin = f.sandbox.admin.clone();
    let loss = ["drill", "cluster-loss", "central", "--fsts", "default/redis", "--admin", &admin, "-o", "json"];
    let out = f.spanset(&[&loss[..], &["--timeout", "120", "--report", &page_arg]].concat()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("report: {page_arg}")), "the page's path is named: {stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report as well");

    let started = Instant::now();
    let loaded = chromium.load(&page);
    let shot = dir.join("cluster-loss.png");
    chromium.screenshot(&page, &shot, (1400, 900));
    println!("chromium: page loaded and screenshot taken in {:.1} s", started.elapsed().as_secs_f64());
    println!("screenshot: {}", shot.display());
    let dom = &loaded.dom;
    assert!(loaded.console.is_empty(), "the page logged to its console: {:#?}", loaded.console);
    assert!(dom.contains("spanset drill: cluster-loss central in default/redis"), "{dom}");
    assert!(!dom.contains("http://") && !dom.contains("https://"), "the page refers to nothing outside: {dom}");

    // A lane per ordinal, each segment coloured as the legend colours its member.
    let lanes = lanes(dom);
    assert_eq!(lanes.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5], "{dom}");
    let legend: BTreeMap<String, String> =
        Regex::new(r#"<li class="cluster" data-cluster="([^"]*)"><span class="swatch" style="background:([^"]*)""#)
            .unwrap()
            .captures_iter(dom)
            .map(|c| (c[1].to_string(), c[2].to_string()))
            .collect();
    assert_eq!(legend.keys().map(String::as_str).collect::<Vec<_>>(), ["central", "east", "west"], "{dom}");
    let colours: std::collections::BTreeSet<&String> = legend.values().collect();
    assert_eq!(colours.len(), 3, "a colour per member: {legend:?}");
    for (k, shown) in &lanes {
        assert!(!shown.is_empty(), "ordinal {k} ran: {dom}");
        for s in shown {
            assert_eq!(Some(&s.fill), legend.get(&s.cluster), "ordinal {k}'s segment in {}", s.cluster);
        }
    }

    // The fault and every phase, once each, in the order the drill went through them.
    let marks: Vec<(String, String, f64)> =
        Regex::new(r#"<g class="mark (fault|phase)" data-label="([^"]*)"><line x1="([0-9.]+)""#)
            .unwrap()
            .captures_iter(dom)
            .map(|c| (c[1].to_string(), c[2].to_string(), c[3].parse().unwrap()))
            .collect();
    let order = [
        ("fault", "nodes powered off"),
        ("fault", "API partitioned"),
        ("phase", "detected"),
        ("phase", "fenced"),
        ("phase", "re-homed"),
        ("fault", "API healed"),
        ("phase", "shrunk"),
        ("fault", "nodes powered on"),
        ("phase", "unfenced"),
        ("phase", "back"),
    ];
    let got: Vec<(&str, &str)> = marks.iter().map(|(k, l, _)| (k.as_str(), l.as_str())).collect();
    assert_eq!(got, order, "{dom}");
    let x: BTreeMap<&str, f64> = marks.iter().map(|(_, l, x)| (l.as_str(), *x)).collect();
    assert!(marks.windows(2).all(|w| w[0].2 <= w[1].2), "the marks stand in time order: {marks:?}");

    // Central's ordinals: in central when it was lost, elsewhere only once the loss was
    // detected, back in central at the end.
    for k in [4, 5] {
        let shown = &lanes[&k];
        assert_eq!(shown.first().map(|s| s.cluster.as_str()), Some("central"), "ordinal {k}: {shown:?}");
        assert_eq!(shown.last().map(|s| s.cluster.as_str()), Some("central"), "ordinal {k}: {shown:?}");
        let away: Vec<&Shown> = shown.iter().filter(|s| s.cluster != "central").collect();
        assert!(!away.is_empty(), "ordinal {k} re-homed: {shown:?}");
        assert!(away.iter().all(|s| s.x > x["detected"]), "ordinal {k} left before the loss was detected: {shown:?}");
    }

    // The verdict and the figures of the JSON report.
    assert!(dom.contains(r#"<td id="verdict" class="clean">clean</td>"#), "{dom}");
    for (name, key) in
        [("detected unreachable", "detectionSeconds"), ("fenced", "fencedSeconds"), ("total", "totalSeconds")]
    {
        let row = format!("<tr><th>{name}</th><td>{:.2} s</td></tr>", r[key].as_f64().unwrap());
        assert!(dom.contains(&row), "{row} in {dom}");
    }

    // The screenshot: a PNG of the window's size, and not a blank page (one is about 6 KB).
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
    assert_eq!(png_size(&png), Some((1400, 900)), "{}", shot.display());
    assert!(png.len() > 20_000, "a {} byte screenshot shows next to nothing: {}", png.len(), shot.display());
    f.assert_ledger_clean();
}

#[test]
fn a_report_that_cannot_be_written_fails_the_drill_before_it_starts_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("no-such-dir").join("drill.html");
    // No sandbox is needed: the path is checked before anything is touched.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["drill", "cluster-loss", "central", "--fsts", "default/redis", "--admin", "http://127.0.0.1:9"])
        .arg("--report")
        .arg(&page)
        .args(["--kubeconfig", &dir.path().join("kubeconfig").display().to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot write the report {}", page.display())), "{err}");
}
