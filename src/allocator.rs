//! The settings of the binary's allocator, mimalloc (the global allocator of `src/main.rs`;
//! Cargo.toml says why it is there).

// Links mimalloc's C library, whose options are set here, into the library's own tests too.
use mimalloc as _;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_e` (mimalloc.h) in the sources
/// that libmimalloc-sys builds. That crate does not name it, so it is spelled here; it is set
/// only while the option holds the purge delay's default, and a test checks that it does.
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// The default purge delay of mimalloc v3 (what libmimalloc-sys builds without its `v2`
/// feature), in milliseconds: no other option at that place has this default.
const DEFAULT_PURGE_DELAY: std::ffi::c_long = 1000;

unsafe extern "C" {
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Keeps the memory that Burn's CPU backend frees for reuse, where mimalloc would hand it
/// back to the system a second after its last use: fashion-mlp frees and allocates megabyte
/// buffers every step, and each purge made a later step fault the pages in again. A 2-epoch
/// fashion-mlp bench took 12,000 page faults, with 3 % of its cycles in the kernel's page
/// clearing, against 900 faults with purging off. `MIMALLOC_PURGE_DELAY` still wins.
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: reads and sets an integer option; mimalloc reads its options atomically.
    unsafe {
        if mi_option_get(MI_OPTION_PURGE_DELAY) == DEFAULT_PURGE_DELAY {
            mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

/// Has the kernel back the process's memory with small pages, where mimalloc asks for
/// transparent huge pages (`madvise(MADV_HUGEPAGE)` on the arena it maps at start-up, before
/// `main`, so its own option comes too late). A huge page's first touch makes the kernel find,
/// and where memory is fragmented (as after another large process) compact, 2 MiB of
/// contiguous memory: reading a 2,000,000-row table after `pandas.read_csv` had read it took
/// 1.9 s, 1.4 s of it in the kernel, against 1.3 s and 0.4 s on small pages. Training steps
/// lose about 2 % (fashion-mlp on an AVX-512 machine), less than the whole run gains
/// (docs/benchmarks/reading-a-large-table.md). `MIMALLOC_ALLOW_THP` set leaves huge pages on.
pub fn small_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: sets a flag of the calling process; no memory is passed. A kernel without
        // the option (before 3.15) returns an error, and the pages stay as they were.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_is_found_and_turned_off() {
        assert!(std::env::var_os("MIMALLOC_PURGE_DELAY").is_none());
        // SAFETY: reads an integer option.
        let delay = || unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(
            delay(),
            DEFAULT_PURGE_DELAY,
            "mimalloc option {MI_OPTION_PURGE_DELAY}"
        );
        keep_freed_memory();
        assert_eq!(delay(), -1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn huge_pages_are_turned_off() {
        assert!(std::env::var_os("MIMALLOC_ALLOW_THP").is_none());
        small_pages();
        // SAFETY: reads a flag of the calling process.
        let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(disabled, 1);
    }
}
