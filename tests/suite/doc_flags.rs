//! Every flag of every `spanset` subcommand is documented, and no flag the docs document is
//! missing from the binary. The subcommands are walked from `spanset --help` down (`sim-ctl
//! fault`, `drill chaos`, …), each one's flags read from its `--help` (`-h`/`--help` and
//! `-V`/`--version`, clap's own, aside).
//!
//! Where a flag counts as documented: in a **flag table** of `README.md` or `docs/`, a Markdown
//! table whose header's first cell is ``flag of `spanset COMMAND` `` (docs/cli.md holds most of
//! them; `spanset sim`'s is in docs/sandbox.md and `spanset sandbox`'s in
//! docs/getting-started.md, beside the prose about them); a header naming several commands
//! (``flag of `spanset guard wait` and `spanset guard watch` ``) documents each row for each. A row documents the flags written in
//! the code spans of its first cell (`` `-o, --output FORMAT` ``); words before the first flag
//! name a subcommand of the table's (`` `partition --hang` `` in the table of `spanset sim-ctl`),
//! so that small subcommands share one table. Each flag is documented once, so there is one
//! place to keep in step.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use crate::support::docs::{markdown_files, root, spanset_help, without_fences};

/// clap's own flags, which every subcommand has and no table repeats.
const CLAPS_OWN: [&str; 4] = ["-h", "--help", "-V", "--version"];

/// The subcommand names listed under `Commands:` of a help text (clap's `help` aside).
fn commands_of(help: &str) -> Vec<String> {
    let Some((_, rest)) = help.split_once("\nCommands:\n") else { return Vec::new() };
    rest.lines()
        .take_while(|l| !l.trim().is_empty())
        // A name is indented by two; a wrapped description by more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The flags an entry line of a help text's option list names: `-n, --namespace <NS>` gives
/// `-n` and `--namespace`; `--watch[=<WATCH>]` gives `--watch`.
fn entry_flags(entry: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in entry.split_whitespace() {
        let Some(rest) = word.strip_prefix('-') else { break };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '-').collect();
        out.push(format!("-{name}"));
        if !word.ends_with(',') {
            break;
        }
    }
    out
}

/// The flags a help text lists (clap's own aside): each entry of its option lists, an
/// indented line that starts with `-` (an entry is indented by 2 or 6; its wrapped
/// description by more).
fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter(|l| {
            let indent = l.len() - l.trim_start().len();
            (1..=6).contains(&indent) && l.trim_start().starts_with('-')
        })
        .flat_map(|l| entry_flags(l.trim_start()))
        .filter(|f| !CLAPS_OWN.contains(&f.as_str()))
        .collect()
}

/// Every subcommand of `spanset` (as its words, `["sim-ctl", "fault"]`) with its flags.
fn subcommands() -> BTreeMap<Vec<String>, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let help = spanset_help(&args).unwrap_or_else(|e| panic!("spanset {} --help: {e}", path.join(" ")));
        for name in commands_of(&help) {
            todo.push(path.iter().cloned().chain([name]).collect());
        }
        if !path.is_empty() {
            out.insert(path, help_flags(&help));
        }
    }
    out
}

/// One flag a flag table documents.
#[derive(Debug)]
struct Documented {
    /// `docs/cli.md:12`, its row.
    at: String,
    /// The subcommand, as words.
    command: Vec<String>,
    /// `--namespace`, `-n`.
    flag: String,
}

/// The contents of the code spans of `cell` (single backticks, as flag cells write them).
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The cells of a table row (`| a | b |`), trimmed; `None` for a line that is no row.
fn cells(line: &str) -> Option<Vec<&str>> {
    let inner = line.trim().strip_prefix('|')?;
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    Some(inner.split('|').map(str::trim).collect())
}

/// The flags of one code span of a row: the words before the first flag name a subcommand of
/// the table's command (`partition --hang` in the table of `spanset sim-ctl`), then each flag
/// up to the first word that is not one (`-o, --output FORMAT` gives `-o` and `--output`).
fn span_flags(span: &str) -> (Vec<String>, Vec<String>) {
    let words: Vec<&str> = span.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let first = words.iter().position(|w| w.starts_with('-')).unwrap_or(words.len());
    let sub = words[..first].iter().map(|w| w.to_string()).collect();
    let flags = words[first..]
        .iter()
        .take_while(|w| w.starts_with('-'))
        .map(|w| w.chars().take_while(|c| c.is_alphanumeric() || *c == '-').collect())
        .collect();
    (sub, flags)
}

/// The flags the flag tables of `text` (the file `file`) document, outside fenced blocks.
fn flag_tables(file: &Path, text: &str) -> Vec<Documented> {
    let unfenced = String::from_utf8(without_fences(text)).expect("blanking replaces whole characters");
    let lines: Vec<&str> = unfenced.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let header = cells(lines[i]).and_then(|c| c.first().and_then(|first| first.strip_prefix("flag of ")));
        let Some(named) = header else {
            i += 1;
            continue;
        };
        // Subcommands that share their flags share a table: each code span of the header
        // names one (``flag of `spanset guard wait` and `spanset guard watch` ``).
        let commands: Vec<Vec<String>> =
            code_spans(named).iter().map(|c| c.split_whitespace().skip(1).map(str::to_string).collect()).collect();
        // The delimiter row, then the rows up to the first line that is not one.
        i += 2;
        while let Some(row) = lines.get(i).and_then(|l| cells(l)) {
            for (sub, flags) in code_spans(row[0]).into_iter().map(span_flags) {
                for flag in &flags {
                    for command in &commands {
                        let command = command.iter().chain(&sub).cloned().collect();
                        let at = format!("{}:{}", file.display(), i + 1);
                        out.push(Documented { at, command, flag: flag.clone() });
                    }
                }
            }
            i += 1;
        }
    }
    out
}

/// What the docs get wrong about the flags of `commands`, one line each.
fn flag_problems(commands: &BTreeMap<Vec<String>, BTreeSet<String>>, documented: &[Documented]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: BTreeMap<(&[String], &str), &str> = BTreeMap::new();
    for d in documented {
        let name = format!("spanset {}", d.command.join(" "));
        match commands.get(&d.command) {
            None => {
                problems.push(format!("{}: `{name}` {}: documented, but there is no subcommand `{name}`", d.at, d.flag))
            }
            Some(flags) if !flags.contains(&d.flag) => {
                problems.push(format!("{}: `{name}` {}: documented, but not in its --help", d.at, d.flag))
            }
            Some(_) => {
                if let Some(first) = seen.insert((&d.command, &d.flag), &d.at) {
                    problems.push(format!("{}: `{name}` {}: documented twice (also at {first})", d.at, d.flag));
                }
            }
        }
    }
    for (command, flags) in commands {
        for flag in flags.iter().filter(|f| !seen.contains_key(&(command.as_slice(), f.as_str()))) {
            problems.push(format!(
                "`spanset {}` {flag}: in its --help, but in no flag table (| flag of `spanset …` |) of the docs",
                command.join(" ")
            ));
        }
    }
    problems
}

/// Every flag the flag tables of the docs document.
fn doc_tables() -> Vec<Documented> {
    markdown_files(root())
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(root().join(f)).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            flag_tables(f, &text)
        })
        .collect()
}

#[test]
fn every_flag_of_every_subcommand_is_documented_and_every_documented_flag_exists() {
    let commands = subcommands();
    // The walk reached the nested subcommands, or the test checks less than it says.
    for nested in [&["sim-ctl", "partition"][..], &["drill", "chaos"], &["rollout", "status"]] {
        let nested: Vec<String> = nested.iter().map(|s| s.to_string()).collect();
        assert!(commands.contains_key(&nested), "`spanset {}` not found in {:?}", nested.join(" "), commands.keys());
    }
    let problems = flag_problems(&commands, &doc_tables());
    assert!(problems.is_empty(), "the docs and --help disagree on flags:\n{}", problems.join("\n"));
}

/// The checker on a small help and book: it reads flags as a reader and clap write them.
#[test]
fn the_flag_checker_names_the_subcommand_and_flag_it_finds_wrong() {
    let help = "Usage: spanset x [OPTIONS] <NAME>\n\nArguments:\n  <NAME>  a name\n\nOptions:\n  -n, --namespace <NS>\n          The namespace\n          -- not an entry\n      --watch[=<WATCH>]  Watch\n      --kubeconfig <FILE>  Its\n  -h, --help  Print help\n";
    let flags = help_flags(help);
    assert_eq!(flags.iter().map(String::as_str).collect::<Vec<_>>(), ["--kubeconfig", "--namespace", "--watch", "-n"]);
    assert_eq!(
        commands_of("x\n\nCommands:\n  fault  Inject\n         wrapped\n  help   Print\n\nOptions:\n"),
        ["fault"]
    );
    let book = "\
| flag of `spanset x` | meaning |
|---|---|
| `-n, --namespace NS` | the namespace |
| `--watch[=BOOL]` | follow |
| `--bogus` | none |
| `--namespace` | again |

```
| flag of `spanset y` | in a fence |
```
| flag of `spanset` | x |
|---|---|
| `z --quiet` | a subcommand's |
| `nothing --at-all` | none |

| flag of `spanset v` and `spanset u` | shared |
|---|---|
| `--shared` | both |
";
    let tables = flag_tables(Path::new("docs/cli.md"), book);
    let commands = BTreeMap::from([
        (vec!["x".to_string()], flags),
        (vec!["z".to_string()], BTreeSet::from(["--quiet".to_string()])),
        (vec!["w".to_string()], BTreeSet::from(["--loud".to_string()])),
        (vec!["v".to_string()], BTreeSet::from(["--shared".to_string()])),
        (vec!["u".to_string()], BTreeSet::from(["--shared".to_string(), "--own".to_string()])),
    ]);
    assert_eq!(
        flag_problems(&commands, &tables),
        [
            "docs/cli.md:5: `spanset x` --bogus: documented, but not in its --help",
            "docs/cli.md:6: `spanset x` --namespace: documented twice (also at docs/cli.md:3)",
            "docs/cli.md:14: `spanset nothing` --at-all: documented, but there is no subcommand `spanset nothing`",
            "`spanset u` --own: in its --help, but in no flag table (| flag of `spanset …` |) of the docs",
            "`spanset w` --loud: in its --help, but in no flag table (| flag of `spanset …` |) of the docs",
            "`spanset x` --kubeconfig: in its --help, but in no flag table (| flag of `spanset …` |) of the docs",
        ]
    );
}
