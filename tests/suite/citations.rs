//! Comments say why in words a reader can follow: none points at the project's internal tracker
//! ("see" the word issue or item followed by a number), which no reader of the code can open.
//! The check reads every text file of the code, its tests, benches, docs and deployment files,
//! and the README; it builds its pattern from parts, so that its own source passes it too.

use std::path::{Path, PathBuf};

/// The trees read: the code and everything shipped or read beside it.
const TREES: [&str; 7] = ["src", "tests", "benches", "docs", "deploy", "dashboards", "examples"];

/// The files read beside the trees: the front page, the build and CI.
const FILES: [&str; 3] = ["README.md", "Cargo.toml", ".ci/run"];

/// The words that, followed by a number, cite a tracker entry.
const WORDS: [&str; 2] = ["issue", "item"];

/// Every file under `dir` whose content is text, with its path.
fn text_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(text_files(&path));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
    out
}

/// Where `line` cites a tracker entry: one of [`WORDS`] (or its plural) as a whole word, then
/// spaces or a `#`, then a digit. Answers the citation as written.
fn citation(line: &str) -> Option<&str> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    for word in WORDS {
        for (at, _) in lower.match_indices(word) {
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let mut end = at + word.len();
            if bytes.get(end) == Some(&b's') {
                end += 1;
            }
            let gap = bytes[end..].iter().take_while(|b| **b == b' ' || **b == b'#').count();
            if gap > 0 && bytes.get(end + gap).is_some_and(u8::is_ascii_digit) {
                let digits = bytes[end + gap..].iter().take_while(|b| b.is_ascii_digit()).count();
                return Some(&line[at..end + gap + digits]);
            }
        }
    }
    None
}

#[test]
fn the_pattern_finds_a_citation_and_nothing_else() {
    let (issue, item) = (WORDS[0], WORDS[1]);
    for cited in [
        format!("// before {issue} 24, a member took 15 s"),
        format!("/// ({} 19, {item} 15)", issue.to_uppercase()),
        format!("# see {issue} #7"),
        format!("// {item}s 4 and 5"),
    ] {
        assert!(citation(&cited).is_some(), "not found in {cited:?}");
    }
    for plain in [
        format!("// an {item} of 3 elements"),
        format!("let {item}_3 = 1; // {issue}d 2 tokens"),
        "// a tissue 3 cm thick".to_string(),
        format!("// no {issue} here"),
    ] {
        assert_eq!(citation(&plain), None, "{plain:?}");
    }
}

#[test]
fn no_comment_cites_the_internal_tracker() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut read = 0;
    let files = FILES.iter().map(|f| {
        let path = root.join(f);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        (path, text)
    });
    for (path, text) in TREES.iter().flat_map(|tree| text_files(&root.join(tree))).chain(files) {
        read += 1;
        for (i, line) in text.lines().enumerate() {
            if let Some(cited) = citation(line) {
                let file = path.strip_prefix(root).unwrap_or(&path).display();
                found.push(format!("{file}:{}: {cited:?} in {}", i + 1, line.trim()));
            }
        }
    }
    // The trees were read: a moved root would otherwise pass with nothing checked.
    assert!(read > 100, "only {read} files read under {TREES:?}");
    assert!(
        found.is_empty(),
        "say the reason instead of citing the tracker, whose numbering no reader can follow:\n{}",
        found.join("\n")
    );
}
