//! The launch path's code lies in one section of a few pages (`cudablame_hot_text`, src/lib.rs):
//! read from the built library's section headers and symbol tables.

mod common;

use object::{Object, ObjectSection, ObjectSymbol};

/// The section's name (src/lib.rs) and the most it may grow to: a few 4 KiB pages.
const SECTION: &str = "cudablame_hot_text";
const MAX_BYTES: u64 = 32 << 10;

#[test]
fn every_launch_runs_code_of_one_small_section() {
    let bytes = std::fs::read(common::shim()).expect("read libcudablame.so");
    let elf = object::File::parse(&*bytes).expect("libcudablame.so is an ELF file");
    let hot = elf
        .section_by_name(SECTION)
        .unwrap_or_else(|| panic!("no {SECTION} section"));
    let (start, size) = (hot.address(), hot.size());
    assert!(
        size > 0 && size <= MAX_BYTES,
        "{SECTION} is {size} bytes (at most {MAX_BYTES})"
    );
    let inside = |name: &str| -> bool {
        let mut found = elf
            .symbols()
            .chain(elf.dynamic_symbols())
            .filter(|s| s.is_definition())
            .filter(|s| {
                let raw = s.name().unwrap_or("");
                raw == name || format!("{:#}", rustc_demangle::demangle(raw)) == name
            })
            .peekable();
        assert!(found.peek().is_some(), "no symbol {name}");
        found.all(|s| (start..start + size).contains(&s.address()))
    };
    // The exported launch wrappers and what every recorded launch runs after them
    // (`cargo build --release` keeps the local symbols: `debug = 1`).
    for name in [
        "cuLaunchKernel",
        "cuLaunchKernel_ptsz",
        "cuLaunchKernelEx",
        "cuLaunchKernelEx_ptsz",
        "cudablame::interpose::run",
        "cudablame::record::hot::enqueue",
        "cudablame::record::hot::stack_copy",
        "cudablame::record::ring::Ring::push",
        "cudablame::stack::python::capture::PythonStack::cached",
    ] {
        assert!(inside(name), "{name} is not in {SECTION}");
    }
    // A copy or a synchronization's wrapper is not (only launches' are moved there).
    assert!(!inside("cuMemcpyAsync"), "cuMemcpyAsync is in {SECTION}");
}
