//! Which tests ran with the external programs they need (each `kubectl.1.NN`, `dig`,
//! `promtool`…) and which were skipped for want of one, printed when the suite ends. A test
//! that skips passes, so without this a machine lacking a kubectl version would pass the tests
//! of that version without running them and nobody would see it; each skip is also printed as
//! it happens, past the test harness's capture of a passing test's output. Under `CI` a
//! missing program fails the test instead, naming it.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write,
    sync::{Mutex, Once},
};

/// Tests by program: those that ran with it, those skipped for want of it.
struct Tally {
    ran: BTreeMap<String, BTreeSet<String>>,
    skipped: BTreeMap<String, BTreeSet<String>>,
}

static TALLY: Mutex<Tally> = Mutex::new(Tally { ran: BTreeMap::new(), skipped: BTreeMap::new() });

/// The running test: the test harness names each test's thread after it.
fn test_name() -> String {
    std::thread::current().name().unwrap_or("unnamed").to_string()
}

/// The tally is printed as the process exits, once the harness has run every test. libc's
/// `atexit` is the one hook that runs after the harness's last test; it is `unsafe` to declare.
#[allow(unsafe_code)]
fn print_at_exit() {
    static REGISTERED: Once = Once::new();
    unsafe extern "C" {
        fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
    }
    extern "C" fn print() {
        let tally = TALLY.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(std::io::stderr(), "{}", summary(&tally.ran, &tally.skipped));
    }
    // SAFETY: `atexit` only stores the pointer of a function that lives as long as the process.
    REGISTERED.call_once(|| unsafe {
        atexit(print);
    });
}

/// The lines printed at exit: how many tests ran with each program, and every skip by name.
fn summary(ran: &BTreeMap<String, BTreeSet<String>>, skipped: &BTreeMap<String, BTreeSet<String>>) -> String {
    let counts = |by: &BTreeMap<String, BTreeSet<String>>| match by.is_empty() {
        true => "none".to_string(),
        false => by.iter().map(|(program, tests)| format!("{program} {}", tests.len())).collect::<Vec<_>>().join(", "),
    };
    let mut out = format!("external programs: tests that ran with each: {}", counts(ran));
    if skipped.is_empty() {
        out.push_str("; none skipped");
    } else {
        let tests: BTreeSet<&String> = skipped.values().flatten().collect();
        out.push_str(&format!("\nexternal programs: {} tests SKIPPED for want of: {}", tests.len(), counts(skipped)));
        for (program, tests) in skipped {
            for test in tests {
                out.push_str(&format!("\n  skipped {test}: no {program}"));
            }
        }
    }
    out
}

/// Records that the running test found `program` and runs with it.
pub fn found(program: &str) {
    print_at_exit();
    let mut tally = TALLY.lock().unwrap_or_else(|e| e.into_inner());
    tally.ran.entry(program.to_string()).or_default().insert(test_name());
}

/// Records that the running test goes without `program` (`why`: where it was looked for, or
/// how to install it), and says so at once. Under `CI` the test fails here instead.
pub fn missing(program: &str, why: &str) {
    assert!(std::env::var_os("CI").is_none(), "{program} is missing ({why}), and CI is set");
    print_at_exit();
    let test = test_name();
    let _ = writeln!(std::io::stderr(), "skipped {test}: {program} is missing ({why})");
    let mut tally = TALLY.lock().unwrap_or_else(|e| e.into_inner());
    tally.skipped.entry(program.to_string()).or_default().insert(test);
}

#[test]
fn the_summary_counts_tests_by_program_and_names_each_skip() {
    let set = |tests: &[&str]| tests.iter().map(|t| t.to_string()).collect::<BTreeSet<_>>();
    let ran = BTreeMap::from([("kubectl.1.27".to_string(), set(&["a", "b"])), ("dig".to_string(), set(&["c"]))]);
    assert_eq!(
        summary(&ran, &BTreeMap::new()),
        "external programs: tests that ran with each: dig 1, kubectl.1.27 2; none skipped"
    );
    let skipped = BTreeMap::from([("kubectl.1.29".to_string(), set(&["kubectl::kubectl_1_29"]))]);
    assert_eq!(
        summary(&ran, &skipped),
        "external programs: tests that ran with each: dig 1, kubectl.1.27 2\n\
         external programs: 1 tests SKIPPED for want of: kubectl.1.29 1\n  skipped kubectl::kubectl_1_29: no kubectl.1.29"
    );
}
