//! The docs (`README.md`, `docs/`, the READMEs of `deploy/` and `dashboards/`) and `spanset --help` as the tests that keep the docs true
//! read them: which files are the docs, where their fenced blocks are, and what the binary's
//! help says. One reading, so that the link, runbook, flag and manifest checks agree on what a
//! code block is.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The repository, where the docs are.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// How many ValidatingAdmissionPolicies `spanset join` installs in a member: those of
/// `deploy/member/admission.yaml`, each with its binding. The docs and tests that count the
/// member's guards count these.
pub fn admission_policies_shipped() -> usize {
    let text = std::fs::read_to_string(root().join("deploy/member/admission.yaml")).expect("admission.yaml");
    text.lines().filter(|l| l.trim() == "kind: ValidatingAdmissionPolicy").count()
}

/// `README.md`, every Markdown file under `docs/`, and the READMEs of `deploy/` and
/// `dashboards/`, relative to `root`.
pub fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else { return };
        for entry in entries {
            let path = dir.join(entry.expect("directory entry").file_name());
            if root.join(&path).is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![PathBuf::from("README.md"), "deploy/README.md".into(), "dashboards/README.md".into()];
    walk(root, Path::new("docs"), &mut out);
    out.sort();
    out
}

/// A fenced code block of a Markdown file.
#[derive(Debug)]
pub struct Fenced {
    /// The line of the opening fence (1-based).
    pub line: usize,
    /// The info string after the opening fence (`yaml`, `sh`, `yaml fragment`), trimmed.
    pub info: String,
    /// The nearest non-blank line before the opening fence (the closing fence of a block right
    /// above it, too), trimmed; "" at the top of the file.
    pub before: String,
    /// The lines between the fences.
    pub body: String,
}

/// Where fences open and close in `text`, the way a code host renders it: a run of three or
/// more backticks or tildes opens a block, closed by a run of the same character at least as
/// long with nothing after it. Calls `each(line_index, line, state)` for every line, where
/// state is `None` outside a block, `Some(true)` on a fence line, `Some(false)` inside.
fn scan_fences<'a>(text: &'a str, mut each: impl FnMut(usize, &'a str, Option<bool>)) {
    let mut open: Option<(char, usize)> = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        let fence = |c: char| trimmed.chars().take_while(|&x| x == c).count();
        let state = match open {
            Some((c, n)) => {
                let closes = fence(c) >= n && trimmed.trim_start_matches(c).trim().is_empty();
                if closes {
                    open = None;
                }
                Some(closes)
            }
            None => {
                for c in ['`', '~'] {
                    if fence(c) >= 3 {
                        open = Some((c, fence(c)));
                    }
                }
                open.map(|_| true)
            }
        };
        each(i, line, state);
    }
}

/// `text` with every line of a fenced code block (fences included) blanked, byte for byte, so
/// offsets and line numbers stay those of the file.
pub fn without_fences(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    scan_fences(text, |_, line, state| {
        out.extend(line.bytes().map(|b| if state.is_some() && b != b'\n' { b' ' } else { b }));
    });
    out
}

/// The fenced code blocks of `text`, in order.
pub fn fenced_blocks(text: &str) -> Vec<Fenced> {
    let mut out: Vec<Fenced> = Vec::new();
    let mut inside = false;
    let mut last_line = "";
    scan_fences(text, |i, line, state| {
        match state {
            Some(true) if !inside => {
                inside = true;
                let info = line.trim().trim_start_matches(['`', '~']).trim().to_string();
                let before = last_line.to_string();
                out.push(Fenced { line: i + 1, info, before, body: String::new() });
            }
            Some(true) => inside = false,
            Some(false) => out.last_mut().expect("a block is open").body.push_str(line),
            None => {}
        }
        if !line.trim().is_empty() {
            last_line = line.trim();
        }
    });
    out
}

/// `spanset ARGS --help`: its text if the subcommand exists, else what the binary said.
pub fn spanset_help(args: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_spanset")).args(args).arg("--help").output().expect("spanset runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn fenced_blocks_are_found_with_their_info_string_and_the_line_before_them() {
    let text = "# T\n\n<!-- fragment -->\n```yaml\na: 1\n```\ntext\n\n~~~~sh\n```\nnot a fence\n~~~~\n````\nunclosed";
    let blocks = fenced_blocks(text);
    let seen: Vec<(usize, &str, &str, &str)> =
        blocks.iter().map(|b| (b.line, b.info.as_str(), b.before.as_str(), b.body.as_str())).collect();
    assert_eq!(
        seen,
        [
            (4, "yaml", "<!-- fragment -->", "a: 1\n"),
            (9, "sh", "text", "```\nnot a fence\n"),
            (13, "", "~~~~", "unclosed")
        ]
    );
    let blanked = String::from_utf8(without_fences(text)).unwrap();
    assert_eq!(
        blanked.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>(),
        ["# T", "<!-- fragment -->", "text"]
    );
}
