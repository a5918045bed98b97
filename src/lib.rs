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

pub mod blame;
pub mod config;
pub mod cuda;
pub mod detect;
pub mod interpose;
pub mod real;
pub mod record;
pub mod report;
pub mod safety;
pub mod stack;
pub mod threads;

pub use safety::guarded;
