//! What a thread was started to run, for launches from threads whose stack no longer says it.
//!
//! A kernel launched from a `std::thread` whose body ends in the launch is often reached by a
//! tail call: the program's frames are gone and the launch stack shows only the stub over
//! libstdc++'s thread trampoline and libc's `start_thread`, both unnamed. The thread's start is
//! still knowable when it is created: `pthread_create` (interposed, `interpose::pthread_create`)
//! notes the start routine's address and, for a `std::thread` (start routine in libstdc++'s text,
//! argument a `std::thread::_State`), a copy of the first words of the state object (its vtable
//! pointer and the callable, which a function-pointer callable holds by value), its `_M_run` and
//! the address of its dynamic type's name (which survives `strip`, e.g.
//! `std::thread::_State_impl<...<main::{lambda()#1}>...>`): the state is alive then, and freed
//! when the thread's callable returns. Names are looked up only when a report is written
//! ([`std_thread_function`], and the report's symbolizer).
//!
//! The hook runs in every thread creation of the program, also inside `dlopen` (a library
//! constructor starting threads while glibc's loader lock is held): it takes no lock the loader
//! holds and calls nothing that may (no `dladdr`, `dlsym`, no symbol-table scan: issue 19 items 2
//! and 3; `dladdr` waited forever for the lock there, and scanned the whole dynamic symbol table
//! on every call, 17 -> 680 µs per thread from a library with 60k symbols). It allocates nothing.
//! Whether a start routine lies in libstdc++ is read from a table of libstdc++'s text ranges
//! ([`STDCXX`]), rebuilt with `dl_iterate_phdr` when glibc's load/unload counters change
//! (`dl_iterate_phdr` takes only `dl_load_write_lock`, which the loader holds while it edits its
//! list, never while running constructors or destructors).
//! A thread's first hooked call binds its OS id to its `pthread_t` (`bind_current`, once per
//! thread); the report joins the two.
//!
//! Fixed tables, no allocation, no lock: the newest [`SLOTS`] creations and bindings are kept.
//! Matching is by `pthread_t` and generation: a thread's binding comes after its creation began
//! (the generation is taken before `pthread_create` runs) and before any reuse of its `pthread_t`
//! (which needs it to have exited), so the right creation is the newest one with that `pthread_t`
//! begun before the binding.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Creations and bindings kept.
pub(crate) const SLOTS: usize = 1024;
/// Words of a `std::thread` state object copied at creation (the vtable pointer, then the
/// callable's tuple): a function pointer and up to 6 words of arguments.
pub(crate) const STATE_WORDS: usize = 8;

static GEN: AtomicU64 = AtomicU64::new(1);

struct Created {
    gen: AtomicU64,
    pthread: AtomicUsize,
    start: AtomicUsize,
    run: AtomicUsize,
    type_name: AtomicUsize,
    state: [AtomicUsize; STATE_WORDS],
}

struct Bound {
    gen: AtomicU64,
    pthread: AtomicUsize,
    tid: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NEW_CREATED: Created = Created {
    gen: AtomicU64::new(0),
    pthread: AtomicUsize::new(0),
    start: AtomicUsize::new(0),
    run: AtomicUsize::new(0),
    type_name: AtomicUsize::new(0),
    state: [ZERO; STATE_WORDS],
};
#[allow(clippy::declare_interior_mutable_const)]
const NEW_BOUND: Bound = Bound {
    gen: AtomicU64::new(0),
    pthread: AtomicUsize::new(0),
    tid: AtomicUsize::new(0),
};

static CREATED: [Created; SLOTS] = [NEW_CREATED; SLOTS];
static NEXT_CREATED: AtomicUsize = AtomicUsize::new(0);
static BOUND: [Bound; SLOTS] = [NEW_BOUND; SLOTS];
static NEXT_BOUND: AtomicUsize = AtomicUsize::new(0);

/// What is known about a thread's start before it exists.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Start {
    gen: u64,
    pub(crate) start: usize,
    /// `std::thread`: the state's `_M_run`.
    pub(crate) run: usize,
    /// `std::thread`: the state's mangled type name (a NUL-terminated string in a module).
    pub(crate) type_name: usize,
    /// `std::thread`: the first words of the state object, as they were at creation (word 0 is
    /// the vtable pointer).
    pub(crate) state: [usize; STATE_WORDS],
}

/// The text (executable) ranges of loaded libstdc++ images, and glibc's load/unload counters
/// (`dlpi_adds`, `dlpi_subs`) when they were read. A seqlock: `version` is odd while a writer
/// (one at a time, `writing`) changes the ranges; readers retry or give up.
struct StdCxx {
    version: AtomicU64,
    writing: AtomicBool,
    counters: [AtomicU64; 2],
    ranges: [[AtomicUsize; 2]; 4],
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_RANGE: [AtomicUsize; 2] = [ZERO; 2];
/// See [`StdCxx`].
static STDCXX: StdCxx = StdCxx {
    version: AtomicU64::new(0),
    writing: AtomicBool::new(false),
    counters: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
    ranges: [NO_RANGE; 4],
};

/// glibc's `(dlpi_adds, dlpi_subs)`: loads and unloads so far.
pub(crate) fn load_counters() -> (u64, u64) {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _: usize, out: *mut c_void) -> i32 {
        // SAFETY: called by dl_iterate_phdr with a valid info and our out pointer.
        unsafe { *(out as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs) };
        1
    }
    let mut c = (0u64, 0u64);
    // SAFETY: the callback only writes to `c`.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut c as *mut _ as *mut c_void) };
    c
}

/// Rebuilds [`STDCXX`] if modules were loaded or unloaded since it was built. Returns false when
/// the table cannot be trusted now (another thread is rebuilding it).
fn refresh_stdcxx() -> bool {
    let now = load_counters();
    let have = (
        STDCXX.counters[0].load(Ordering::Acquire),
        STDCXX.counters[1].load(Ordering::Acquire),
    );
    if have == now {
        return true;
    }
    if STDCXX
        .writing
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, out: *mut c_void) -> i32 {
        // SAFETY: valid pointers from dl_iterate_phdr for the duration of the callback; `out` is
        // the `(ranges, n)` of `refresh_stdcxx`.
        let (info, out) = unsafe { (&*info, &mut *(out as *mut ([[usize; 2]; 4], usize))) };
        if info.dlpi_name.is_null() || out.1 >= out.0.len() {
            return 0;
        }
        // SAFETY: a NUL-terminated path owned by the loader, valid during the callback.
        let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes();
        let file = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
        if !file.starts_with(b"libstdc++.so") {
            return 0;
        }
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        for p in phdrs {
            if p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0 && out.1 < out.0.len() {
                let lo = info.dlpi_addr as usize + p.p_vaddr as usize;
                out.0[out.1] = [lo, lo + p.p_memsz as usize];
                out.1 += 1;
            }
        }
        0
    }
    let mut found = ([[0usize; 2]; 4], 0usize);
    // SAFETY: the callback only writes to `found`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut found as *mut _ as *mut c_void) };
    STDCXX.version.fetch_add(1, Ordering::AcqRel); // odd: being written
    for (slot, r) in STDCXX.ranges.iter().zip(found.0) {
        slot[0].store(r[0], Ordering::Relaxed);
        slot[1].store(r[1], Ordering::Relaxed);
    }
    STDCXX.counters[0].store(now.0, Ordering::Relaxed);
    STDCXX.counters[1].store(now.1, Ordering::Relaxed);
    STDCXX.version.fetch_add(1, Ordering::AcqRel); // even: consistent
    STDCXX.writing.store(false, Ordering::Release);
    true
}

/// Reads the loaded modules (libstdc++'s text ranges) now: the library constructor, so that the
/// first thread creations find the table built.
pub(crate) fn note_modules() {
    refresh_stdcxx();
}

/// Whether `addr` lies in the text of a loaded libstdc++ (false when unknown).
fn in_stdcxx(addr: usize) -> bool {
    if !refresh_stdcxx() {
        return false;
    }
    for _ in 0..4 {
        let v = STDCXX.version.load(Ordering::Acquire);
        if v % 2 == 1 {
            std::hint::spin_loop();
            continue;
        }
        let hit = STDCXX.ranges.iter().any(|r| {
            let (lo, hi) = (r[0].load(Ordering::Relaxed), r[1].load(Ordering::Relaxed));
            lo != 0 && (lo..hi).contains(&addr)
        });
        std::sync::atomic::fence(Ordering::Acquire);
        if STDCXX.version.load(Ordering::Relaxed) == v {
            return hit;
        }
    }
    false
}

/// Called by `pthread_create` before the real one: notes the start routine and, for a
/// `std::thread`, its state's vtable-derived addresses and first words. Reads only the state
/// object (alive until the thread has run its callable) and its vtable and type info (in the
/// program's image); takes no lock, allocates nothing.
pub(crate) fn before_create(start: usize, arg: usize) -> Start {
    let mut s = Start {
        gen: GEN.fetch_add(1, Ordering::AcqRel),
        start,
        ..Start::default()
    };
    // libstdc++ calls pthread_create only from `std::thread::_M_start_thread`, with its thread
    // routine and a `_State*` (a polymorphic object) as the argument.
    if arg != 0 && arg.is_multiple_of(std::mem::align_of::<usize>()) && in_stdcxx(start) {
        // Words of the state, never past the end of the (mapped) page that holds its first word.
        let page_end = (arg | 4095) + 1;
        let n = ((page_end - arg) / 8).min(STATE_WORDS);
        for i in 0..n {
            // SAFETY: inside the page of the live state object, which is mapped; 8-byte aligned.
            s.state[i] = unsafe { std::ptr::read_volatile((arg + 8 * i) as *const usize) };
        }
        let vptr = s.state[0];
        if vptr != 0 && vptr.is_multiple_of(8) {
            // Itanium ABI: vptr[-1] is the typeinfo, whose second word is the mangled name; the
            // vtable of `_State` is { ~_State (complete), ~_State (deleting), _M_run }.
            // SAFETY: the vtable and type info of a polymorphic object of the program, mapped
            // read-only data of a loaded image.
            unsafe {
                s.run = *((vptr + 2 * 8) as *const usize);
                let ti = *((vptr - 8) as *const usize);
                if ti != 0 && ti.is_multiple_of(8) {
                    s.type_name = *((ti + 8) as *const usize);
                }
            }
        }
    }
    s
}

/// Whether `addr` lies in a loaded module (`dladdr`): report time only.
fn in_module(addr: usize) -> bool {
    if addr == 0 {
        return false;
    }
    // SAFETY: dladdr only reads loader data.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        libc::dladdr(addr as *const c_void, &mut info) != 0 && !info.dli_fname.is_null()
    }
}

/// Called after a successful `pthread_create`.
pub(crate) fn created(pthread: usize, s: Start) {
    let slot = &CREATED[NEXT_CREATED.fetch_add(1, Ordering::Relaxed) % SLOTS];
    slot.gen.store(0, Ordering::Release);
    slot.pthread.store(pthread, Ordering::Relaxed);
    slot.start.store(s.start, Ordering::Relaxed);
    slot.run.store(s.run, Ordering::Relaxed);
    slot.type_name.store(s.type_name, Ordering::Relaxed);
    for (w, &v) in slot.state.iter().zip(&s.state) {
        w.store(v, Ordering::Relaxed);
    }
    slot.gen.store(s.gen, Ordering::Release);
}

thread_local! {
    static TID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The calling thread's OS id, cached.
pub(crate) fn thread_id() -> u32 {
    // Without thread-local storage (a hook running in a TLS destructor or after): no cache.
    // SAFETY: gettid has no preconditions.
    let ask = || unsafe { libc::gettid() } as u32;
    TID.try_with(|t| {
        if t.get() == 0 {
            t.set(ask());
            bind_current(t.get());
        }
        t.get()
    })
    .unwrap_or_else(|_| ask())
}

/// Forgets the calling thread's cached id (the `pthread_atfork` child handler): the forking
/// thread has a new OS id in the child.
pub(crate) fn reset_after_fork() {
    let _ = TID.try_with(|t| t.set(0));
}

/// Binds the calling thread's OS id to its `pthread_t` (once per thread, at its first hooked
/// call).
pub(crate) fn bind_current(tid: u32) {
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as usize;
    let slot = &BOUND[NEXT_BOUND.fetch_add(1, Ordering::Relaxed) % SLOTS];
    slot.gen.store(0, Ordering::Release);
    slot.pthread.store(me, Ordering::Relaxed);
    slot.tid.store(tid as usize, Ordering::Relaxed);
    slot.gen
        .store(GEN.fetch_add(1, Ordering::AcqRel), Ordering::Release);
}

/// The start of thread `tid`, if it was created (through `pthread_create`) while cudablame was
/// loaded and has made a hooked call.
pub(crate) fn start_of(tid: u32) -> Option<Start> {
    let (bgen, pthread) = BOUND
        .iter()
        .filter_map(|b| {
            let g = b.gen.load(Ordering::Acquire);
            (g != 0 && b.tid.load(Ordering::Relaxed) == tid as usize)
                .then(|| (g, b.pthread.load(Ordering::Relaxed)))
        })
        .max_by_key(|&(g, _)| g)?;
    CREATED
        .iter()
        .filter_map(|c| {
            let g = c.gen.load(Ordering::Acquire);
            (g != 0 && g < bgen && c.pthread.load(Ordering::Relaxed) == pthread).then(|| Start {
                gen: g,
                start: c.start.load(Ordering::Relaxed),
                run: c.run.load(Ordering::Relaxed),
                type_name: c.type_name.load(Ordering::Relaxed),
                state: std::array::from_fn(|i| c.state[i].load(Ordering::Relaxed)),
            })
        })
        .max_by_key(|s| s.gen)
}

/// The mangled type name a [`Start`] points at, if any (and if its image is still loaded).
pub(crate) fn type_name(s: &Start) -> Option<String> {
    if !in_module(s.type_name) {
        return None;
    }
    // SAFETY: in a loaded image (checked above); typeinfo names are NUL-terminated.
    let raw = unsafe { CStr::from_ptr(s.type_name as *const std::ffi::c_char) };
    Some(raw.to_string_lossy().into_owned())
}

/// The function a `std::thread` was started to run, when its callable is a function pointer:
/// read from the state's copied words at the offset the state's type gives. Report time only.
///
/// libstdc++ (`<bits/std_thread.h>`, `<tuple>`): the state is
/// `std::thread::_State_impl<std::thread::_Invoker<std::tuple<F, Args...>>>`, a vtable pointer
/// followed by the `_Invoker`, whose only member is the tuple of the decayed callable and
/// arguments. `_Tuple_impl<I, Head, Tail...>` derives first from `_Tuple_impl<I + 1, Tail...>`
/// and then from `_Head_base<I, Head>`, so the last element lies at offset 0 and the callable
/// `F` last, each element at its natural alignment. Only element types whose size and alignment
/// are known from their names are accepted (pointers, function pointers, references wrapped in
/// `std::reference_wrapper`, scalars); anything else gives `None`.
pub(crate) fn std_thread_function(s: &Start) -> Option<usize> {
    let ty = demangled(&type_name(s)?)?;
    let offset = callable_offset(&ty)?;
    let word = 1 + offset / 8;
    (word < STATE_WORDS && s.state[0] != 0)
        .then(|| s.state[word])
        .filter(|&f| f != 0)
}

fn demangled(mangled: &str) -> Option<String> {
    let m = mangled.trim_start_matches('*');
    let sym = cpp_demangle::Symbol::new(format!("_ZTS{m}")).ok()?;
    let full = sym
        .demangle(&cpp_demangle::DemangleOptions::default())
        .ok()?;
    // A type's mangled name demangles as "typeinfo name for T" when given as a symbol.
    Some(full.trim_start_matches("typeinfo name for ").to_string())
}

/// The byte offset of `F` in the state's tuple, from the demangled state type (see
/// [`std_thread_function`]).
fn callable_offset(ty: &str) -> Option<usize> {
    let prefix = "std::thread::_State_impl<std::thread::_Invoker<std::tuple<";
    let inner = ty.strip_prefix(prefix)?;
    // The tuple's arguments: up to the '>' that closes "std::tuple<".
    let mut depth = 0i32;
    let mut parts = Vec::new();
    let mut begin = 0;
    let mut end = None;
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '>' if depth == 0 => {
                end = Some(i);
                break;
            }
            '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(inner[begin..i].trim());
                begin = i + 1;
            }
            _ => {}
        }
    }
    parts.push(inner[begin..end?].trim());
    let (callable, args) = parts.split_first()?;
    if !is_function_pointer(callable) {
        return None;
    }
    let mut offset = 0usize;
    for a in args.iter().rev() {
        let (size, align) = size_and_align(a)?;
        offset = offset.next_multiple_of(align) + size;
    }
    Some(offset.next_multiple_of(8))
}

fn is_function_pointer(t: &str) -> bool {
    t.contains("(*)(") && t.ends_with(')') || t.ends_with("(*)()")
}

/// Size and alignment (bytes, x86-64 System V) of a decayed argument type named `t`.
fn size_and_align(t: &str) -> Option<(usize, usize)> {
    if t.ends_with('*') || is_function_pointer(t) || t.starts_with("std::reference_wrapper<") {
        return Some((8, 8));
    }
    let t = t.trim_end_matches(" const");
    Some(match t {
        "bool" | "char" | "signed char" | "unsigned char" => (1, 1),
        "short" | "unsigned short" | "char16_t" => (2, 2),
        "int" | "unsigned int" | "float" | "char32_t" | "wchar_t" => (4, 4),
        "long" | "unsigned long" | "long long" | "unsigned long long" | "double"
        | "std::nullptr_t" | "decltype(nullptr)" => (8, 8),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_binding_and_reuse() {
        let s1 = before_create(0x1000, 0);
        created(0xAAA0, s1);
        // The thread binds: tid 77 runs on pthread 0xAAA0... but bind_current uses pthread_self,
        // so bind by hand through the same table.
        let slot = &BOUND[NEXT_BOUND.fetch_add(1, Ordering::Relaxed) % SLOTS];
        slot.pthread.store(0xAAA0, Ordering::Relaxed);
        slot.tid.store(77, Ordering::Relaxed);
        slot.gen
            .store(GEN.fetch_add(1, Ordering::AcqRel), Ordering::Release);
        // A later thread reuses the pthread_t: the first thread keeps its start.
        let s2 = before_create(0x2000, 0);
        created(0xAAA0, s2);
        assert_eq!(start_of(77).map(|s| s.start), Some(0x1000));
        assert_eq!(start_of(78), None);
    }

    #[test]
    fn the_callable_of_a_std_thread_is_found_by_the_tuple_layout() {
        let state = |args: &str| {
            format!("std::thread::_State_impl<std::thread::_Invoker<std::tuple<{args}> > >")
        };
        // Last element first in memory, the callable last.
        assert_eq!(callable_offset(&state("void (*)(int*), int*")), Some(8));
        assert_eq!(callable_offset(&state("void (*)()")), Some(0));
        assert_eq!(
            callable_offset(&state("void (*)(int, char, int*), int, char, int*")),
            Some(16)
        );
        assert_eq!(
            callable_offset(&state("void (*)(int, int), int, int")),
            Some(8)
        );
        assert_eq!(
            callable_offset(&state("void (*)(std::vector<int, std::allocator<int> >), std::vector<int, std::allocator<int> >")),
            None,
            "unknown sizes give up"
        );
        assert_eq!(
            callable_offset(&state("main::{lambda()#1}")),
            None,
            "not a function pointer"
        );
        assert_eq!(
            demangled("NSt6thread11_State_implINS_8_InvokerISt5tupleIJPFvPiES3_EEEEEE").as_deref(),
            Some("std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)(int*), int*> > >")
        );
    }
}
