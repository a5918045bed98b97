//! cudablame's report format, shared by the preload library (which builds and writes reports) and
//! the `cudablame` command (which reads and renders them): the JSON model with its schema version,
//! the text and Chrome-trace renderings, report path patterns and the hint table.
//!
//! serde and std only: no FFI, no CUDA, nothing that runs inside the watched program's hooks, so
//! every piece here is unit-tested alone (`cargo test -p cudablame-report`).

pub mod hints;
pub mod model;
pub mod pattern;
pub mod text;
pub mod trace;

#[doc(hidden)]
pub mod fixtures;
