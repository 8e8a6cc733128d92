//! Docs that tests keep true: every relative link and `#anchor` in `README.md` and `docs/`
//! resolves, and `docs/architecture.md` documents exactly the top-level modules of
//! `crates/spanset-controller/src/`. A reader who follows a link or looks a module up finds it, and a renamed
//! heading or module fails here instead of in front of that reader.
//!
//! Markdown is read the way a code host renders it, as far as these checks need: links inside
//! fenced code blocks and code spans are text, not links; anchors are the GitHub slugs of ATX
//! headings. External links (any `scheme:`) are not followed.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    path::{Component, Path, PathBuf},
};

use crate::support::docs::{markdown_files, root, without_fences};

/// Whether the line starting at `at` holds only whitespace (a paragraph ends there).
fn blank_line_at(bytes: &[u8], at: usize) -> bool {
    bytes[at..].iter().take_while(|&&b| b != b'\n').all(|b| b.is_ascii_whitespace())
}

/// Blanks every code span (a run of n backticks up to the next run of exactly n in the same
/// paragraph); an unmatched run is literal text.
fn blank_code_spans(bytes: &mut [u8]) {
    let run = |bytes: &[u8], at: usize| bytes[at..].iter().take_while(|&&b| b == b'`').count();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run(bytes, i);
        let mut j = i + n;
        let mut close = None;
        while j < bytes.len() {
            match bytes[j] {
                b'`' => {
                    let m = run(bytes, j);
                    if m == n {
                        close = Some(j + m);
                        break;
                    }
                    j += m;
                }
                b'\n' if blank_line_at(bytes, j + 1) => break,
                _ => j += 1,
            }
        }
        match close {
            Some(end) => {
                bytes[i..end].iter_mut().filter(|b| **b != b'\n').for_each(|b| *b = b' ');
                i = end;
            }
            None => i += n,
        }
    }
}

/// The text a reader sees as prose: fenced blocks and code spans blanked.
fn prose(text: &str) -> String {
    let mut bytes = without_fences(text);
    blank_code_spans(&mut bytes);
    String::from_utf8(bytes).expect("blanking replaces whole characters")
}

/// A link's destination and the line it is on (1-based).
#[derive(Debug)]
struct Link {
    line: usize,
    target: String,
}

/// Destinations of inline links and images (`[text](dest)`, `![alt](dest)`) and of reference
/// definitions (`[label]: dest`) in `text`.
fn links(text: &str) -> Vec<Link> {
    let prose = prose(text);
    let line_of = |at: usize| prose[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    for (at, _) in prose.match_indices("](") {
        let rest = prose[at + 2..].trim_start_matches([' ', '\t']);
        let target = if let Some(angled) = rest.strip_prefix('<') {
            angled.split('>').next().unwrap_or_default().to_string()
        } else {
            let mut depth = 0usize;
            rest.chars()
                .take_while(|&c| match c {
                    '(' => {
                        depth += 1;
                        true
                    }
                    ')' if depth == 0 => false,
                    ')' => {
                        depth -= 1;
                        true
                    }
                    c => !c.is_whitespace(),
                })
                .collect()
        };
        out.push(Link { line: line_of(at), target });
    }
    for (i, line) in prose.lines().enumerate() {
        let t = line.trim_start();
        if line.len() - t.len() > 3 || !t.starts_with('[') {
            continue;
        }
        if let Some((_, dest)) = t.split_once("]:") {
            let target = dest.split_whitespace().next().unwrap_or_default();
            out.push(Link { line: i + 1, target: target.trim_matches(['<', '>']).to_string() });
        }
    }
    out
}

/// The ATX headings of `text` outside fenced blocks: (level, text as written).
fn headings(text: &str) -> Vec<(usize, String)> {
    let unfenced = String::from_utf8(without_fences(text)).expect("blanking replaces whole characters");
    unfenced
        .lines()
        .filter_map(|line| {
            let t = line.trim_start();
            if line.len() - t.len() > 3 {
                return None;
            }
            let level = t.chars().take_while(|&c| c == '#').count();
            let rest = &t[level..];
            if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
                return None;
            }
            // A closing sequence of `#`s is not part of the heading.
            let rest = rest.trim();
            let stripped = rest.trim_end_matches('#');
            let rest = if stripped.is_empty() || stripped.ends_with([' ', '\t']) { stripped.trim() } else { rest };
            Some((level, rest.to_string()))
        })
        .collect()
}

/// A heading's anchor as GitHub makes it: the rendered text (a link's text, not its
/// destination), lowercased, every character but letters, digits, spaces, `-` and `_` dropped,
/// each space turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some((label, after)) = rest[open + 1..].split_once("](") else { break };
        let Some(close) = after.find(')') else { break };
        text.push_str(&rest[..open]);
        text.push_str(label);
        rest = &after[close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor `text` defines: each heading's slug, a repeated one with `-1`, `-2`, … as
/// GitHub numbers them.
fn anchors(text: &str) -> HashSet<String> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut out = HashSet::new();
    for (_, heading) in headings(text) {
        let base = slug(&heading);
        let mut anchor = base.clone();
        while out.contains(&anchor) {
            let n = counts.entry(base.clone()).or_default();
            *n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// Whether `target` names a scheme (`https:`, `mailto:`): not a path in the repository.
fn is_external(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else { return false };
    scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `path` (relative to the repository) joined with `link`, resolved lexically; `None` when it
/// climbs out of the repository, where no reader of the repository can follow it.
fn resolve(from: &Path, link: &str) -> Option<PathBuf> {
    let joined = match link.strip_prefix('/') {
        Some(from_root) => PathBuf::from(from_root),
        None => from.parent().unwrap_or(Path::new("")).join(link),
    };
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir if out.as_os_str().is_empty() => return None,
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(p) => out.push(p),
            _ => {}
        }
    }
    Some(out)
}

/// What is wrong with the links of `file` (a path relative to `root`), one line each.
fn broken_links(root: &Path, file: &Path) -> Vec<String> {
    let read = |rel: &Path| std::fs::read_to_string(root.join(rel));
    let text = read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut problems = Vec::new();
    for Link { line, target } in links(&text) {
        if target.is_empty() || is_external(&target) {
            continue;
        }
        let at = format!("{}:{line}: ({target})", file.display());
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() { Some(file.to_path_buf()) } else { resolve(file, path) };
        let Some(linked) = linked else {
            problems.push(format!("{at} points outside the repository"));
            continue;
        };
        if !root.join(&linked).exists() {
            problems.push(format!("{at}: no file or directory {}", linked.display()));
            continue;
        }
        // Anchors are headings of Markdown files; other files' anchors (a line, `#L10`) are
        // the code host's and not checked.
        let Some(anchor) = anchor.filter(|_| linked.extension().is_some_and(|e| e == "md")) else { continue };
        let defined = match read(&linked) {
            Ok(target_text) => anchors(&target_text),
            Err(e) => {
                problems.push(format!("{at}: {} cannot be read: {e}", linked.display()));
                continue;
            }
        };
        if !defined.contains(anchor) {
            problems.push(format!("{at}: no heading of {} has the anchor #{anchor}", linked.display()));
        }
    }
    problems
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let files = markdown_files(root());
    assert!(files.contains(&PathBuf::from("docs/architecture.md")), "docs/ was not found: {files:?}");
    let problems: Vec<String> = files.iter().flat_map(|f| broken_links(root(), f)).collect();
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
}

/// The checker itself, on a small book: it must see what a reader sees, or the test above
/// passes on links it never looked at.
#[test]
fn the_link_checker_reports_what_a_reader_would_find_broken() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    let page = "# Guide\n\n## Set up: `spanset join` (members)\n\n## Notes\n\n## Notes\n";
    std::fs::write(dir.path().join("docs/guide.md"), page).unwrap();
    let readme = "\
# Front

[ok](docs/guide.md#set-up-spanset-join-members) [second notes](docs/guide.md#notes-1)
[self](#front) ![dir](docs/) [web](https://example.com/#nothing) [line](docs/guide.md)
[bad anchor](docs/guide.md#setup)
[missing](docs/nowhere.md)
[escapes](../outside.md)
`[in a span](docs/nowhere.md)`

```sh
# a comment, not a heading

[in a fence](docs/nowhere.md)
```
~~~
[in a tilde fence](docs/nowhere.md)
~~~
[not a heading](#a-comment-not-a-heading)

[ref]: docs/gone.md
";
    std::fs::write(dir.path().join("README.md"), readme).unwrap();
    let problems = broken_links(dir.path(), Path::new("README.md"));
    assert_eq!(
        problems,
        [
            "README.md:5: (docs/guide.md#setup): no heading of docs/guide.md has the anchor #setup",
            "README.md:6: (docs/nowhere.md): no file or directory docs/nowhere.md",
            "README.md:7: (../outside.md) points outside the repository",
            "README.md:18: (#a-comment-not-a-heading): no heading of README.md has the anchor #a-comment-not-a-heading",
            "README.md:20: (docs/gone.md): no file or directory docs/gone.md",
        ]
    );
}

/// The modules under `crates/spanset-controller/src/`, by path: each `NAME.rs` but `lib.rs`, each
/// `NAME/`; a role folder (a `mod.rs` of docs, a table of its modules and `pub mod` lines only)
/// stands for its modules, `ROLE::NAME`.
fn controller_modules() -> BTreeSet<String> {
    fn entries(dir: &Path) -> Vec<(String, std::path::PathBuf)> {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .filter_map(|path| {
                let name = path.file_name()?.to_str()?.to_string();
                let name = if path.is_dir() { Some(name) } else { name.strip_suffix(".rs").map(str::to_string) }?;
                (name != "lib" && name != "mod").then_some((name, path))
            })
            .collect()
    }
    let grouping = |dir: &Path| {
        std::fs::read_to_string(dir.join("mod.rs")).is_ok_and(|text| {
            text.lines()
                .all(|l| l.is_empty() || l.starts_with("//!") || (l.starts_with("pub mod ") && l.ends_with(';')))
                && text.contains("//! | module | one reason to change |")
        })
    };
    let mut out = BTreeSet::new();
    for (name, path) in entries(&root().join("crates/spanset-controller/src")) {
        if path.is_dir() && grouping(&path) {
            out.extend(entries(&path).into_iter().map(|(child, _)| format!("{name}::{child}")));
        } else {
            out.insert(name);
        }
    }
    out
}

/// The modules `docs/architecture.md` documents: the `` ### `NAME` `` headings of its section
/// on `crates/spanset-controller/src/`, each with the text under it. Panics naming what is malformed.
fn documented_modules() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let unfenced = String::from_utf8(without_fences(&text)).expect("blanking replaces whole characters");
    let mut in_section = false;
    let mut out: Vec<(String, String)> = Vec::new();
    for line in unfenced.lines() {
        if let Some(h2) = line.strip_prefix("## ") {
            in_section = h2.contains("`crates/spanset-controller/src/`");
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some(h3) = line.strip_prefix("### ") {
            let name = h3.trim().strip_prefix('`').and_then(|n| n.strip_suffix('`'));
            let name = name.unwrap_or_else(|| panic!("docs/architecture.md: `### {h3}` is not a module's `name`"));
            out.push((name.to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line.trim());
        }
    }
    assert!(
        !out.is_empty(),
        "docs/architecture.md has no `## … `crates/spanset-controller/src/`` section of `### `module`` headings"
    );
    out
}

#[test]
fn the_architecture_page_documents_exactly_the_controller_modules() {
    let documented = documented_modules();
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for (name, body) in &documented {
        if !names.insert(name.clone()) {
            problems.push(format!("`{name}` is documented twice"));
        }
        if body.is_empty() {
            problems.push(format!("`{name}` has a heading and no paragraph"));
        }
    }
    let tree = controller_modules();
    let missing: Vec<&String> = tree.difference(&names).collect();
    let extra: Vec<&String> = names.difference(&tree).collect();
    if !missing.is_empty() {
        problems.push(format!("modules of crates/spanset-controller/src/ not documented: {missing:?}"));
    }
    if !extra.is_empty() {
        problems.push(format!("documented modules not in crates/spanset-controller/src/: {extra:?}"));
    }
    assert!(
        problems.is_empty(),
        "docs/architecture.md, section on crates/spanset-controller/src/:\n{}",
        problems.join("\n")
    );
}

/// Where the docs count the member's admission policies ("eleven ValidatingAdmissionPolicies"),
/// the number is the one `deploy/member/admission.yaml` ships: adding a guard to the manifest
/// without the docs (or the docs without the manifest) fails here, naming each place.
#[test]
fn the_docs_count_the_member_s_admission_policies_as_the_manifest_ships_them() {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    let shipped = crate::support::docs::admission_policies_shipped();
    assert!(shipped > 5, "the manifest's policies were found: {shipped}");
    let mut counted = Vec::new();
    let mut wrong = Vec::new();
    for file in markdown_files(root()) {
        let text = std::fs::read_to_string(root().join(&file)).expect("a doc");
        for (i, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
            for pair in words.windows(2).filter(|p| p[1] == "ValidatingAdmissionPolicies") {
                let said = pair[0].to_ascii_lowercase();
                let Some(n) = WORDS.iter().position(|w| *w == said).or_else(|| said.parse().ok()) else { continue };
                counted.push(format!("{}:{}", file.display(), i + 1));
                if n != shipped {
                    wrong.push(format!("{}:{}: says {said}, the manifest ships {shipped}", file.display(), i + 1));
                }
            }
        }
    }
    assert!(counted.len() >= 3, "the counts were found: {counted:?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
