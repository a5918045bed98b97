#![cfg_attr(test, allow(dead_code))] // Unit tests: the hooks are not exported, so not roots.
//! cudablame: names the culprit launch of an asynchronous CUDA error.
//!
//! `libcudablame.so` is loaded with `LD_PRELOAD` into unmodified programs. The data path, one
//! module per step:
//!
//! ```text
//! interpose ──> real ──> record ──> detect ──> blame ──> report
//! exports,      driver's   per-stream ring    error code   which op   text on stderr,
//! dlsym,        functions  + progress marker  of the real  faulted    JSON file
//! cuGetProcAddress          + native stack    call
//! ```
//! `real::printf` also captures the device-side assert lines the driver prints (patching only
//! `libcuda.so.1`'s own `vfprintf` import slot when the driver is first found); `blame` uses the
//! kernel they name. `threads` notes what each thread was started to run (`pthread_create`), for
//! launches whose stack lost the program's frames. `cuda` holds the FFI types and the one declared list of hooked entry points; `stack` captures
//! and symbolizes host stacks; `config` reads the `CUDABLAME_*` variables; `safety` keeps the
//! program unchanged (panics contained, stderr writes that cannot hurt, fork handling).

//!
//! The statics every recorded op reads (the gate, `safety::gate`, that sends every call but the
//! common case the general way; switches, the driver's and the configuration's cells, the
//! clock's anchor, the stream table's epoch) carry `#[link_section = "cudablame_hot"]`: the
//! linker puts them side by side in one section of a few cache lines, where they were spread
//! over eight lines of `.data` and `.bss` (`nm` of the release build). Between two launches a
//! framework's own work evicts them; each line the hook touches is then a miss on the
//! launching thread (the eleventh session's cold `cuCtxGetCurrent`: 275-460 ns). All of them
//! are written rarely (at start, a fork, a capture's edges, a stream's creation), so sharing
//! lines costs no write contention. (On the H200's GPT step the own time did not move measurably:
//! docs/history.md, Performance, twelfth session.)
//!
//! The code every recorded launch runs (the exported launch wrappers, `interpose::run`,
//! `record::hot::enqueue` and `stack_copy`, `Ring::push`, the Python stack cache's walk) carries
//! `#[link_section = "cudablame_hot_text"]` likewise: one executable section of a few pages
//! (about 20 KiB; `shim-tests/tests/hot_text.rs` checks what is in it and its size), where the
//! compiler's code units spread it over some ten 4 KiB pages of `.text` (`nm -n` of the release
//! build). Each page is a page walk when a framework's own code and data have evicted the TLB
//! between two launches, and on the simulated driver such a walk-bound launch costs several
//! times a cache-bound one (docs/history.md, Performance, nineteenth session): with cachegrind's caches
//! shaped as TLBs (4 KiB lines), a launch after 4,096 other pages touched 20.5 code pages before,
//! 16.9 now. The closures an exported wrapper passes (`interpose::exports`) stay in `.text`: a
//! closure takes no attribute.
//!
//! Imports point one way, down this list (a module uses only modules listed before it; checked by
//! the `imports_follow_the_layers` test below). Vocabulary shared by several steps (`OpKind`,
//! `Confidence`, `Frame`, `DeviceAssert`, path patterns) comes from the report crate,
//! `cudablame_report`, which sits below all of them:
//!
//! ```text
//! safety    panics contained, stderr, fork-safe cells (the bottom: uses nothing of the crate)
//! clock     wall-clock ns from the time-stamp counter, anchored to CLOCK_REALTIME (libc only)
//! config    CUDABLAME_* read once
//! cuda      FFI types, the declared entry-point list, Side
//! threads   the calling thread's id, what each thread was started to run
//! real      glibc's dlsym/dlclose, the driver's functions, printf capture
//! stack     native and Python stack capture, interning, symbolization
//! record    per-stream rings and markers (hot), synchronization bookkeeping (cold)
//! blame     rings + error -> ranked verdict (pure)
//! report    builds the report from record and blame, writes it
//! detect    error codes of real calls -> one report per process
//! interpose the exports (top: calls record and detect; registers the fork reset of every table)
//! ```

/// The module order of the list above, lowest first.
#[cfg(test)]
const LAYERS: [&str; 12] = [
    "safety",
    "clock",
    "config",
    "cuda",
    "threads",
    "real",
    "stack",
    "record",
    "blame",
    "report",
    "detect",
    "interpose",
];

mod blame;
mod clock;
mod config;
mod cuda;
mod detect;
mod interpose;
mod real;
mod record;
mod report;
mod safety;
mod stack;
mod threads;

/// Helpers shared by the modules' unit tests.
#[cfg(test)]
pub(crate) mod test_util {
    /// A xorshift64 generator seeded with `seed` (not 0): each call gives a number below `n`
    /// (not 0). Reproducible pseudo-random schedules for property and fuzz tests.
    pub(crate) fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every `crate::MODULE` path in a module's code (comments skipped) names a module listed
    /// before it in [`super::LAYERS`] (or itself).
    #[test]
    fn imports_follow_the_layers() {
        let rank = |m: &str| super::LAYERS.iter().position(|l| *l == m);
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src.clone()];
        let mut wrong = Vec::new();
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            let module = rel.split(['/', '.']).next().unwrap().to_string();
            let Some(own) = rank(&module) else {
                continue; // lib.rs
            };
            let text = std::fs::read_to_string(&p).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap();
                for (i, _) in code.match_indices("crate::") {
                    let used: String = code[i + 7..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    let used = if used == "guarded" {
                        "safety".to_string()
                    } else {
                        used
                    };
                    // `for_each_entry_point!` is cuda's macro, exported at the crate root.
                    let used = if used == "for_each_entry_point" {
                        "cuda".to_string()
                    } else {
                        used
                    };
                    match rank(&used) {
                        Some(r) if r > own => {
                            wrong.push(format!("{rel}:{}: {module} uses {used}", n + 1))
                        }
                        _ => {}
                    }
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "imports against the layers:\n{}",
            wrong.join("\n")
        );
    }
}
