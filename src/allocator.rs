//! How the `spanset` binary's allocator (mimalloc) gives memory back. Converging a thousand
//! federations allocates in bursts (requests in flight to a hundred members, decoded objects),
//! and each `/metrics` scrape renders tens of thousands of series; mimalloc (version 3) keeps
//! freed pages a second by default before it purges them. At 100 members × 1,000 federations
//! (`cargo bench --bench scale`, which reads RSS right after a scrape) purging at once was the
//! difference between 478 MiB idle (501 MiB after the scrape) and 460 MiB (460), at the same
//! idle CPU. It lives in the binary: the libraries forbid `unsafe`, and these are calls into
//! mimalloc's C interface, the workspace's one exception to its `unsafe_code` lint.
#![allow(unsafe_code)]

/// mimalloc's `mi_option_purge_delay` (its enum's 16th entry in the compiled version 3; pinned
/// by the unit test below, which reads the option's default, 1,000 ms in `options.c`).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes mimalloc purge freed memory at once, unless `MIMALLOC_PURGE_DELAY` says otherwise
/// (mimalloc reads that variable itself). Called first thing in `main`.
pub fn return_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's option values; called before any thread is spawned.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_whose_default_is_a_second() {
        // SAFETY: reads option values (no other test sets them).
        let (delay, numa) = unsafe {
            (
                libmimalloc_sys::mi_option_get(PURGE_DELAY),
                libmimalloc_sys::mi_option_get(libmimalloc_sys::mi_option_use_numa_nodes),
            )
        };
        assert_eq!(delay, 1000, "option {PURGE_DELAY} is not mimalloc's purge_delay (=1000) in this version");
        // Its neighbour, which the bindings name: the numbering is the one the constant assumes.
        assert_eq!(libmimalloc_sys::mi_option_use_numa_nodes, PURGE_DELAY + 1);
        assert_eq!(numa, 0);
    }
}
