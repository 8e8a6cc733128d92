//! A [`Picture`] as one self-contained HTML page: inline CSS and an inline SVG timeline, no
//! script, font or image from anywhere, so the file can be mailed, archived or opened offline.
//!
//! The elements carry classes and `data-` attributes (`lane` with `data-ordinal`, `segment`
//! with `data-cluster`, `mark` with `data-label`, `#verdict`), so that a test reading the page
//! in a browser can tell what it shows, and so can a person's own tooling.

use std::fmt::Write;

use jiff::Timestamp;

use super::{Lane, MarkKind, Picture};

/// The SVG's width in its own units (it scales to the page).
const WIDTH: f64 = 1200.0;
/// Room for the lane labels on the left.
const LEFT: f64 = 90.0;
/// Room on the right.
const RIGHT: f64 = 16.0;
/// One row of mark labels.
const LABEL_ROW: f64 = 16.0;
/// Most rows of mark labels; further labels share the last row.
const MAX_LABEL_ROWS: usize = 8;
/// A lane's height.
const LANE: f64 = 24.0;
/// Space between lanes.
const GAP: f64 = 8.0;
/// Room for the time axis below the lanes.
const AXIS: f64 = 30.0;
/// About the width of one character of a mark's label, for keeping labels apart.
const CHAR: f64 = 6.6;

/// Colours told apart by people with the common colour-vision deficiencies (Okabe and Ito),
/// then evenly spread hues.
const PALETTE: [&str; 7] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#7F7F7F"];

/// The colour of the `i`th member of the legend.
pub fn colour(i: usize) -> String {
    match PALETTE.get(i) {
        Some(c) => (*c).to_string(),
        None => format!("hsl({}, 55%, 45%)", (i * 137) % 360),
    }
}

/// Text made safe for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The legend's members: the picture's, then any other the lanes show.
fn legend(p: &Picture) -> Vec<String> {
    let mut out = p.clusters.clone();
    for c in super::lanes::clusters_in(&p.lanes) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Maps times to x within the plot.
struct Scale {
    from: Timestamp,
    span: f64,
}

impl Scale {
    fn secs(&self, t: Timestamp) -> f64 {
        t.duration_since(self.from).as_secs_f64()
    }

    fn x(&self, t: Timestamp) -> f64 {
        LEFT + (WIDTH - LEFT - RIGHT) * (self.secs(t) / self.span).clamp(0.0, 1.0)
    }
}

/// A tick step of the time axis giving at most about a dozen ticks.
fn tick_step(span: f64) -> f64 {
    const STEPS: [f64; 14] = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0];
    STEPS.into_iter().find(|s| span / s <= 12.0).unwrap_or(3600.0)
}

/// The row of each labelled mark's label (`None` for a minor mark): the first row where it
/// does not run into the label before it, so that close phases stay readable.
fn label_rows(p: &Picture, scale: &Scale) -> Vec<Option<(usize, f64, bool)>> {
    let mut ends: Vec<f64> = Vec::new();
    let mut order: Vec<usize> = (0..p.marks.len()).collect();
    order.sort_by(|a, b| p.marks[*a].at.cmp(&p.marks[*b].at));
    let mut out = vec![None; p.marks.len()];
    for i in order {
        let m = &p.marks[i];
        if m.minor {
            continue;
        }
        let x = scale.x(m.at);
        let width = CHAR * m.label.chars().count() as f64 + 6.0;
        // A label near the right edge hangs to the left of its line.
        let left_of = x + width > WIDTH;
        let (start, end) = if left_of { (x - width, x) } else { (x, x + width) };
        let row = match ends.iter().position(|e| *e < start) {
            Some(r) => r,
            None if ends.len() < MAX_LABEL_ROWS => {
                ends.push(f64::MIN);
                ends.len() - 1
            }
            None => MAX_LABEL_ROWS - 1,
        };
        ends[row] = end;
        out[i] = Some((row, x, left_of));
    }
    out
}

fn lane_svg(out: &mut String, lane: &Lane, y: f64, scale: &Scale, colours: &[(String, String)]) {
    let colour_of = |c: &str| colours.iter().find(|(n, _)| n == c).map_or("#000", |(_, col)| col.as_str());
    let _ = write!(
        out,
        r##"<g class="lane" data-ordinal="{k}"><text class="lane-label" x="{lx}" y="{ty:.1}">ordinal {k}</text><rect class="lane-bg" x="{LEFT}" y="{y:.1}" width="{w:.1}" height="{LANE}"/>"##,
        k = lane.ordinal,
        lx = LEFT - 8.0,
        ty = y + LANE / 2.0 + 4.0,
        w = WIDTH - LEFT - RIGHT,
    );
    for s in &lane.segments {
        let (x0, x1) = (scale.x(s.from), scale.x(s.until));
        let fill = colour_of(&s.cluster);
        let cluster = escape(&s.cluster);
        // An overlapping run takes the lane's lower half, outlined, over the run it overlaps.
        let (sy, sh, class) =
            if s.overlap { (y + LANE / 2.0, LANE / 2.0, "segment overlap") } else { (y, LANE, "segment") };
        let _ = write!(
            out,
            r##"<g class="{class}" data-cluster="{cluster}"><rect class="run" x="{x0:.2}" y="{sy:.1}" width="{w:.2}" height="{sh:.1}" fill="{fill}"/>"##,
            // A violation may last a few milliseconds: still wide enough to see.
            w = (x1 - x0).max(if s.overlap { 4.0 } else { 1.0 }),
        );
        for (a, b) in &s.ready {
            let (ra, rb) = (scale.x(*a), scale.x(*b));
            let _ = write!(
                out,
                r##"<rect class="ready" x="{ra:.2}" y="{sy:.1}" width="{w:.2}" height="{sh:.1}" fill="{fill}"/>"##,
                w = (rb - ra).max(0.5),
            );
        }
        let _ = write!(
            out,
            "<title>ordinal {} in {cluster}: {:.2} s to {:.2} s{}</title></g>",
            lane.ordinal,
            scale.secs(s.from),
            scale.secs(s.until),
            if s.overlap { " (ran while another run of this ordinal did: a violation)" } else { "" }
        );
    }
    out.push_str("</g>");
}

fn marks_svg(out: &mut String, p: &Picture, scale: &Scale, rows: &[Option<(usize, f64, bool)>], bottom: f64) {
    for (m, row) in p.marks.iter().zip(rows) {
        let kind = match m.kind {
            MarkKind::Fault => "fault",
            MarkKind::Phase => "phase",
        };
        let label = escape(&m.label);
        let x = scale.x(m.at);
        let secs = scale.secs(m.at);
        match row {
            None => {
                let _ = write!(
                    out,
                    r##"<g class="mark {kind} minor" data-label="{label}"><line x1="{x:.2}" x2="{x:.2}" y1="0" y2="{bottom:.1}"/><title>{label} at {secs:.2} s</title></g>"##
                );
            }
            Some((row, _, left_of)) => {
                let ty = LABEL_ROW * (*row as f64 + 1.0);
                let (tx, anchor) = if *left_of { (x - 3.0, "end") } else { (x + 3.0, "start") };
                let _ = write!(
                    out,
                    r##"<g class="mark {kind}" data-label="{label}"><line x1="{x:.2}" x2="{x:.2}" y1="{y1:.1}" y2="{bottom:.1}"/><text x="{tx:.2}" y="{ty:.1}" text-anchor="{anchor}">{label}</text><title>{label} at {secs:.2} s</title></g>"##,
                    y1 = ty - 11.0,
                );
            }
        }
    }
}

fn axis_svg(out: &mut String, scale: &Scale, y: f64) {
    let step = tick_step(scale.span);
    let _ =
        write!(out, r##"<g class="axis"><line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}"/>"##, x2 = WIDTH - RIGHT);
    let mut i = 0u32;
    loop {
        let secs = step * f64::from(i);
        if secs > scale.span + 1e-9 {
            break;
        }
        let x = LEFT + (WIDTH - LEFT - RIGHT) * secs / scale.span;
        let text = if step < 1.0 { format!("{secs:.1} s") } else { format!("{secs:.0} s") };
        let _ = write!(
            out,
            r##"<line x1="{x:.2}" x2="{x:.2}" y1="{y:.1}" y2="{y2:.1}"/><text x="{x:.2}" y="{ty:.1}">{text}</text>"##,
            y2 = y + 5.0,
            ty = y + 18.0
        );
        i += 1;
    }
    out.push_str("</g>");
}

const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1b1b1b; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
.window { color: #555; margin: 0 0 12px; font-size: 13px; }
svg { width: 100%; height: auto; display: block; }
svg text { font-size: 12px; fill: #1b1b1b; }
.lane-label { text-anchor: end; }
.lane-bg { fill: #f1f1f1; }
.run { fill-opacity: 0.35; }
.overlap .run, .overlap .ready { stroke: #b00020; stroke-width: 2; }
.mark line { stroke-width: 1.5; }
.mark.phase line { stroke: #333; }
.mark.fault line { stroke: #b00020; stroke-dasharray: 5 3; }
.mark.fault text { fill: #b00020; font-weight: 600; }
.mark.minor line { stroke-width: 1; stroke-dasharray: none; stroke-opacity: 0.3; }
.axis line { stroke: #888; }
.axis text { text-anchor: middle; fill: #555; font-size: 11px; }
.legend { list-style: none; padding: 0; margin: 12px 0; display: flex; flex-wrap: wrap; gap: 6px 18px; font-size: 13px; }
.swatch { display: inline-block; width: 14px; height: 14px; vertical-align: -2px; margin-right: 6px; border-radius: 2px; }
.swatch.pale { background: #0072B2; opacity: 0.35; }
.swatch.overlap { background: #fff; outline: 2px solid #b00020; outline-offset: -2px; }
.swatch.fault { background: repeating-linear-gradient(90deg, #b00020 0 5px, transparent 5px 8px); height: 2px; vertical-align: 4px; }
.swatch.phase { background: #333; height: 2px; vertical-align: 4px; }
table.figures { border-collapse: collapse; margin-top: 16px; font-size: 14px; }
.figures th, .figures td { border: 1px solid #ccc; padding: 4px 10px; text-align: left; }
.figures th { background: #f6f6f6; font-weight: 600; }
#verdict.clean { color: #006b2e; font-weight: 700; }
#verdict.failed { color: #b00020; font-weight: 700; }
.problems { color: #b00020; }
"#;

/// The whole page, as `--report` writes it: pure, so that its shape is tested without a drill.
pub fn render(p: &Picture) -> String {
    let span = p.until.duration_since(p.from).as_secs_f64().max(0.001);
    let scale = Scale { from: p.from, span };
    let colours: Vec<(String, String)> = legend(p).into_iter().enumerate().map(|(i, c)| (c, colour(i))).collect();
    let rows = label_rows(p, &scale);
    let label_rows = rows.iter().flatten().map(|(r, _, _)| r + 1).max().unwrap_or(0);
    let top = LABEL_ROW * label_rows as f64 + 8.0;
    let bottom = top + (LANE + GAP) * p.lanes.len() as f64;
    let height = bottom + AXIS;
    let title = escape(&p.title);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>spanset drill: {title}</title><style>{STYLE}</style></head>
<body><h1>spanset drill: {title}</h1>
<p class="window">{from} to {until} ({span:.1} s); {n} ordinals</p>
<ul class="legend">"#,
        from = p.from.round(jiff::Unit::Second).unwrap_or(p.from),
        until = p.until.round(jiff::Unit::Second).unwrap_or(p.until),
        n = p.lanes.len(),
    );
    for (c, col) in &colours {
        let c = escape(c);
        let _ = write!(
            out,
            r#"<li class="cluster" data-cluster="{c}"><span class="swatch" style="background:{col}"></span>{c}</li>"#
        );
    }
    out.push_str(concat!(
        r#"<li><span class="swatch pale"></span>running, not Ready</li>"#,
        r#"<li><span class="swatch overlap"></span>two runs at once (violation)</li>"#,
        r#"<li><span class="swatch fault"></span>fault</li>"#,
        r#"<li><span class="swatch phase"></span>phase</li></ul>"#,
    ));
    let _ = write!(
        out,
        r#"<svg class="timeline" viewBox="0 0 {WIDTH} {height:.1}" role="img" aria-label="where each ordinal ran over time">"#
    );
    for (i, lane) in p.lanes.iter().enumerate() {
        lane_svg(&mut out, lane, top + (LANE + GAP) * i as f64, &scale, &colours);
    }
    marks_svg(&mut out, p, &scale, &rows, bottom - GAP);
    axis_svg(&mut out, &scale, bottom);
    out.push_str("</svg>\n<table class=\"figures\">");
    let _ = write!(
        out,
        r#"<tr><th>verdict</th><td id="verdict" class="{}">{}</td></tr>"#,
        if p.clean { "clean" } else { "failed" },
        escape(&p.verdict)
    );
    for (name, value) in &p.figures {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(name), escape(value));
    }
    out.push_str("</table>\n");
    if !p.problems.is_empty() {
        out.push_str(r#"<ul class="problems">"#);
        for v in &p.problems {
            let _ = write!(out, "<li>{}</li>", escape(v));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;
    use crate::cli::drill::picture::{Mark, Segment};

    fn t(s: f64) -> Timestamp {
        Timestamp::from_millisecond(1_800_000_000_000 + (s * 1000.0) as i64).unwrap()
    }

    fn seg(cluster: &str, from: f64, until: f64) -> Segment {
        Segment {
            cluster: cluster.into(),
            from: t(from),
            until: t(until),
            ready: vec![(t(from + 1.0), t(until))],
            overlap: false,
        }
    }

    fn picture() -> Picture {
        Picture {
            title: "cluster-loss central in default/redis".into(),
            from: t(0.0),
            until: t(100.0),
            clusters: vec!["east".into(), "west".into(), "central".into()],
            lanes: vec![
                Lane { ordinal: 0, segments: vec![seg("east", 0.0, 100.0)] },
                Lane {
                    ordinal: 1,
                    segments: vec![seg("central", 0.0, 10.0), seg("west", 30.0, 60.0), seg("central", 70.0, 100.0)],
                },
                Lane { ordinal: 2, segments: vec![] },
            ],
            marks: vec![
                Mark::new(t(10.0), MarkKind::Fault, "power off"),
                Mark::new(t(20.0), MarkKind::Phase, "detected"),
                Mark::new(t(20.1), MarkKind::Phase, "fenced"),
                Mark { minor: true, ..Mark::new(t(50.0), MarkKind::Fault, "latency west") },
            ],
            verdict: "clean".into(),
            clean: true,
            figures: vec![("detected unreachable".into(), "5.95 s".into())],
            problems: vec![],
        }
    }

    /// Every opening tag with `class="..."` exactly `class`.
    fn count(page: &str, class: &str) -> usize {
        page.matches(&format!(r#"class="{class}""#)).count()
    }

    #[test]
    fn a_lane_per_ordinal_and_a_segment_per_run_coloured_as_the_legend() {
        let page = render(&picture());
        assert_eq!(count(&page, "lane"), 3, "one lane per ordinal, an empty one too");
        for k in 0..3 {
            assert!(page.contains(&format!(r#"data-ordinal="{k}""#)), "lane {k}");
        }
        assert_eq!(count(&page, "segment"), 4, "one per run");
        // Legend and segments agree on each member's colour, and the colours differ.
        for (i, c) in ["east", "west", "central"].iter().enumerate() {
            let colour = colour(i);
            assert!(page.contains(&format!(r#"data-cluster="{c}"><span class="swatch" style="background:{colour}""#)));
            let drawn = Regex::new(&format!(r#"data-cluster="{c}"><rect class="run" [^>]* fill="{colour}""#)).unwrap();
            assert!(drawn.is_match(&page), "{c} drawn in {colour}");
        }
        assert_ne!(colour(0), colour(1));
        // Central's lane: central, west, central — in that order.
        let lane1 = &page[page.find(r#"data-ordinal="1""#).unwrap()..page.find(r#"data-ordinal="2""#).unwrap()];
        let order: Vec<&str> = lane1.split(r#"data-cluster=""#).skip(1).map(|s| &s[..s.find('"').unwrap()]).collect();
        assert_eq!(order, ["central", "west", "central"]);
    }

    #[test]
    fn faults_and_phases_are_lines_with_labels_and_the_verdict_and_figures_a_table() {
        let page = render(&picture());
        for (class, label) in [("mark fault", "power off"), ("mark phase", "detected"), ("mark phase", "fenced")] {
            assert!(page.contains(&format!(r#"<g class="{class}" data-label="{label}"><line"#)), "{label}");
            assert!(page.contains(&format!(">{label}</text>")), "{label} printed");
        }
        assert!(page.contains(r#"<g class="mark fault minor" data-label="latency west">"#));
        assert!(!page.contains(">latency west</text>"), "a minor mark's label is only a tooltip");
        // Two phases a tenth of a second apart: their labels go on different rows.
        let y = |label: &str| {
            let at = page.find(&format!(r#"data-label="{label}""#)).unwrap();
            let text = &page[at..][page[at..].find("<text").unwrap()..];
            let y = &text[text.find(" y=\"").unwrap() + 4..];
            y[..y.find('"').unwrap()].to_string()
        };
        assert_ne!(y("detected"), y("fenced"), "close labels do not overprint");
        assert!(page.contains(r#"<td id="verdict" class="clean">clean</td>"#));
        assert!(page.contains("<tr><th>detected unreachable</th><td>5.95 s</td></tr>"));

        let failed = Picture {
            clean: false,
            verdict: "1 ledger violation(s)".into(),
            problems: vec!["ordinal 0 ran in two places".into()],
            ..picture()
        };
        let page = render(&failed);
        assert!(page.contains(r#"<td id="verdict" class="failed">1 ledger violation(s)</td>"#));
        assert!(page.contains("<li>ordinal 0 ran in two places</li>"));
    }

    #[test]
    fn names_are_escaped_and_the_page_loads_nothing_from_elsewhere() {
        let mut p = picture();
        p.title = r#"<script>alert("x")</script> & co"#.into();
        p.clusters[0] = r#"e"a<s>t"#.into();
        p.lanes[0].segments[0].cluster = p.clusters[0].clone();
        p.marks[0].label = "<b>off</b>".into();
        p.figures.push(("it's".into(), "<1 s".into()));
        let page = render(&p);
        assert!(!page.contains("<script"), "no script at all, least of all an injected one");
        assert!(page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co"));
        assert!(page.contains(r#"data-cluster="e&quot;a&lt;s&gt;t""#));
        assert!(!page.contains("<b>off</b>") && page.contains("&lt;b&gt;off&lt;/b&gt;"));
        assert!(page.contains("<th>it&#39;s</th><td>&lt;1 s</td>"));
        for outside in ["http:", "https:", "src=", "@import", "url("] {
            assert!(!page.contains(outside), "{outside} in a self-contained page");
        }
    }

    #[test]
    fn an_overlapping_run_is_drawn_apart_and_times_map_onto_the_plot() {
        let mut p = picture();
        p.lanes[0].segments.push(Segment { overlap: true, ..seg("west", 50.0, 60.0) });
        let page = render(&p);
        assert_eq!(count(&page, "segment overlap"), 1);
        let scale = Scale { from: t(0.0), span: 100.0 };
        assert_eq!(scale.x(t(0.0)), LEFT);
        assert_eq!(scale.x(t(100.0)), WIDTH - RIGHT);
        assert_eq!(scale.x(t(200.0)), WIDTH - RIGHT, "clamped to the plot");
        assert_eq!(tick_step(100.0), 10.0);
        assert_eq!(tick_step(3600.0), 300.0);
        assert_eq!(tick_step(0.5), 0.1);
    }
}
