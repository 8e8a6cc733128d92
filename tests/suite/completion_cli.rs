//! `spanset completion` end to end: each shell's script names every subcommand, and bash
//! accepts the script, registers it for `spanset` and completes a subcommand from a prefix.

use std::process::Command;

use clap::CommandFactory;

use crate::support;

fn completion(shell: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_spanset")).args(["completion", shell]).output().expect("spanset runs");
    support::succeeded(&format!("spanset completion {shell}"), out)
}

/// Every subcommand of the binary, from its own definition.
fn subcommands() -> Vec<String> {
    spanset::cli::Cli::command().get_subcommands().map(|c| c.get_name().to_string()).collect()
}

#[test]
fn every_shells_script_names_every_subcommand() {
    let names = subcommands();
    assert!(names.iter().any(|n| n == "completion") && names.iter().any(|n| n == "status"), "{names:?}");
    for shell in ["bash", "zsh", "fish"] {
        let script = completion(shell);
        assert!(!script.trim().is_empty(), "{shell}: empty script");
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell}: the script does not name `{name}`");
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_spanset")).args(["completion", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
}

#[test]
fn bash_accepts_the_script_and_completes_subcommands_with_it() {
    let Some(bash) = support::program("bash", "bash") else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("spanset.bash");
    std::fs::write(&file, completion("bash")).unwrap();

    let syntax = Command::new(&bash).arg("-n").arg(&file).output().unwrap();
    support::succeeded("bash -n", syntax);

    // Source it, check it is registered for `spanset`, then ask it what `spanset ver<TAB>` and
    // `spanset status -o <TAB>` complete to, as bash's completion machinery would.
    let session = r#"
        source "$1" || exit 10
        complete -p spanset || exit 11
        fn=$(complete -p spanset | sed -n 's/.*-F \([^ ]*\).*/\1/p')
        COMP_WORDS=(spanset ver); COMP_CWORD=1; COMP_LINE="spanset ver"; COMP_POINT=${#COMP_LINE}
        "$fn" spanset ver spanset
        echo "subcommands: ${COMPREPLY[*]}"
        COMP_WORDS=(spanset status -o ''); COMP_CWORD=3; COMP_LINE="spanset status -o "; COMP_POINT=${#COMP_LINE}
        "$fn" spanset '' -o
        echo "formats: ${COMPREPLY[*]}"
    "#;
    let out = Command::new(&bash).args(["-c", session, "bash"]).arg(&file).output().unwrap();
    let text = support::succeeded("bash: source the completion and complete", out);
    assert!(
        text.lines().any(|l| l.starts_with("complete ") && l.contains(" -F ") && l.ends_with(" spanset")),
        "not registered for spanset: {text}"
    );
    assert!(text.contains("subcommands: version\n"), "`spanset ver` did not complete to `version`: {text}");
    let formats = text.lines().find_map(|l| l.strip_prefix("formats: ")).unwrap_or_default();
    for format in ["table", "wide", "json", "yaml"] {
        assert!(formats.split(' ').any(|f| f == format), "`status -o` does not offer {format}: {text}");
    }
}
