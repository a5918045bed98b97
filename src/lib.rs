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
//! `cuda` holds the FFI types and the one declared list of hooked entry points; `stack` captures
//! and symbolizes host stacks; `config` reads the `CUDABLAME_*` variables.

pub mod blame;
pub mod config;
pub mod cuda;
pub mod detect;
pub mod interpose;
pub mod real;
pub mod record;
pub mod report;
pub mod stack;

/// Runs cudablame's own work, never letting a panic cross into the program: `None` if it panicked.
pub fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}
