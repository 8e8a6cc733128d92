//! `spanset-guard-exec --state FILE -- COMMAND…`: the first process of every container of a pod
//! guarded by a pod lease (see [`spanset_guard_exec::run`]). Built beside `spanset`, from which
//! `spanset guard wait` copies it into the pod; it links only its own small crate.

fn main() {
    std::process::exit(spanset_guard_exec::run::main());
}
