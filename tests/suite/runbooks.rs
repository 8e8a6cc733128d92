//! The alerts' runbooks (`docs/runbooks/`) kept in step with the alerts: an operator paged by an
//! alert follows its `runbook_url` to a page that exists, that answers what the alert means, how
//! to confirm it, what to do and what not to do, and whose `spanset` commands run as written.
//! Both rule files (`rules.yaml`, `prometheusrule.yaml`) name the same alerts with the same
//! runbooks, and the index lists every page.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use crate::support::docs::spanset_help;

/// Where the runbooks live, relative to the repository (and so in every `runbook_url`).
const DIR: &str = "docs/runbooks";

/// The sections every runbook has, in this order.
const SECTIONS: [&str; 4] = ["## What it means", "## How to confirm", "## What to do", "## What not to do"];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Each alert of a rule file with its `runbook_url` (None: it has none). The rule groups are
/// `groups` in a plain rule file and `spec.groups` in a PrometheusRule.
fn alerts(path: &str) -> BTreeMap<String, Option<String>> {
    let doc: serde_yaml::Value = serde_yaml::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let groups = doc.get("spec").unwrap_or(&doc)["groups"].as_sequence().unwrap_or_else(|| panic!("{path}: no groups"));
    let mut out = BTreeMap::new();
    for rule in groups.iter().flat_map(|g| g["rules"].as_sequence().into_iter().flatten()) {
        let Some(alert) = rule["alert"].as_str() else { continue };
        let url = rule["annotations"]["runbook_url"].as_str().map(str::to_string);
        assert!(out.insert(alert.to_string(), url).is_none(), "{path}: alert {alert} twice");
    }
    assert!(!out.is_empty(), "{path}: no alerts");
    out
}

/// The runbooks in [`DIR`] by alert name (the index, README.md, aside).
fn runbooks() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(repo(DIR)).expect("docs/runbooks") {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
        if name == "README.md" {
            continue;
        }
        let alert = name.strip_suffix(".md").unwrap_or_else(|| panic!("{DIR}/{name}: not a Markdown page"));
        out.insert(alert.to_string(), std::fs::read_to_string(&path).expect("runbook readable"));
    }
    out
}

#[test]
fn every_alert_names_its_existing_runbook_in_both_rule_files() {
    let plain = alerts("deploy/prometheus/rules.yaml");
    let operator = alerts("deploy/prometheus/prometheusrule.yaml");
    assert_eq!(
        plain.keys().collect::<Vec<_>>(),
        operator.keys().collect::<Vec<_>>(),
        "rules.yaml and prometheusrule.yaml name different alerts"
    );
    let pages = runbooks();
    for (file, alerts) in [("rules.yaml", &plain), ("prometheusrule.yaml", &operator)] {
        for (alert, url) in alerts {
            let url = url.as_deref().unwrap_or_else(|| panic!("{file}: alert {alert} has no runbook_url annotation"));
            let wanted = format!("{DIR}/{alert}.md");
            assert_eq!(url, wanted, "{file}: alert {alert}'s runbook_url names another page");
            assert!(repo(url).is_file(), "{file}: alert {alert}'s runbook_url {url} names no file");
        }
    }
    // No page outlives its alert, and the index lists each one.
    let index = read(&format!("{DIR}/README.md"));
    for alert in pages.keys() {
        assert!(plain.contains_key(alert), "{DIR}/{alert}.md is the runbook of no alert");
        assert!(index.contains(&format!("]({alert}.md)")), "{DIR}/README.md does not link {alert}.md");
    }
}

#[test]
fn every_runbook_says_what_the_alert_means_how_to_confirm_it_what_to_do_and_what_not_to() {
    let pages = runbooks();
    assert!(!pages.is_empty(), "no runbooks in {DIR}");
    for (alert, text) in &pages {
        assert!(text.starts_with(&format!("# {alert}\n")), "{alert}.md: the title is not the alert's name");
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(headings, SECTIONS, "{alert}.md: its sections");
        // Each section says something: text between its heading and the next.
        let mut rest = text.as_str();
        for (i, heading) in SECTIONS.iter().enumerate() {
            let at = rest.find(heading).expect("heading present") + heading.len();
            let body =
                SECTIONS.get(i + 1).and_then(|next| rest[at..].find(next)).map_or(&rest[at..], |e| &rest[at..at + e]);
            assert!(body.trim().len() > 40, "{alert}.md: section {heading:?} is empty");
            rest = &rest[at..];
        }
    }
}

/// The `spanset` command lines of a page's shell blocks (``` sh), continuation lines joined,
/// each up to a pipe or a comment.
fn spanset_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_shell = false;
    let mut line_so_far = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_shell = !in_shell && trimmed == "```sh";
            continue;
        }
        if !in_shell {
            continue;
        }
        line_so_far.push_str(trimmed.trim_end_matches('\\'));
        if trimmed.ends_with('\\') {
            line_so_far.push(' ');
            continue;
        }
        let whole = std::mem::take(&mut line_so_far);
        let command = whole.split(['|', '#']).next().unwrap_or("").trim();
        if command.starts_with("spanset ") {
            out.push(command.to_string());
        }
    }
    out
}

/// What is wrong with one `spanset` command line: a subcommand that does not exist, or a flag
/// its `--help` does not list.
fn check_command(command: &str) -> Result<(), String> {
    let words: Vec<&str> = command.split_whitespace().skip(1).collect();
    let mut path: Vec<&str> = Vec::new();
    let mut text = spanset_help(&[]).map_err(|e| format!("spanset --help: {e}"))?;
    // Down the subcommands while the one reached has some.
    while text.contains("\nCommands:\n") {
        let Some(next) = words.get(path.len()) else { return Err("no subcommand given".into()) };
        path.push(next);
        text = spanset_help(&path).map_err(|e| format!("no subcommand `spanset {}`: {e}", path.join(" ")))?;
    }
    for word in &words[path.len()..] {
        let Some(flag) = word.strip_prefix('-') else { continue };
        let flag = format!("-{}", flag.split('=').next().unwrap_or(flag));
        let listed = if flag.starts_with("--") {
            text.contains(&format!("{flag} ")) || text.contains(&format!("{flag}\n"))
        } else {
            text.contains(&format!("{flag}, "))
        };
        if !listed {
            return Err(format!("`spanset {}` has no flag {flag}", path.join(" ")));
        }
    }
    Ok(())
}

#[test]
fn every_spanset_command_of_the_runbooks_exists_with_its_flags() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (alert, text) in runbooks() {
        for command in spanset_commands(&text) {
            checked += 1;
            if let Err(e) = check_command(&command) {
                wrong.push(format!("{alert}.md: {command}: {e}"));
            }
        }
    }
    assert!(checked >= 6, "only {checked} spanset commands found in the runbooks' shell blocks");
    assert!(wrong.is_empty(), "runbook commands that would not run:\n{}", wrong.join("\n"));
    // The check itself tells a wrong command from a right one.
    assert!(check_command("spanset unfence east --force").is_ok());
    assert!(check_command("spanset unfence east --reason x").is_err(), "unfence has no --reason");
    assert!(check_command("spanset defence east").is_err(), "no such subcommand");
}
