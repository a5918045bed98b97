//! What a thread was started to run, for launches from threads whose stack no longer says it.
//!
//! A kernel launched from a `std::thread` whose body ends in the launch is often reached by a
//! tail call: the program's frames are gone and the launch stack shows only the stub over
//! libstdc++'s thread trampoline and libc's `start_thread`, both unnamed. The thread's start is
//! still knowable when it is created: `pthread_create` (interposed, `interpose::pthread_create`)
//! notes the start routine and, for a `std::thread` (start routine in libstdc++, argument a
//! `std::thread::_State`), the state's dynamic type (its typeinfo name survives `strip`, e.g.
//! `std::thread::_State_impl<...<main::{lambda()#1}>...>`) and its `_M_run`, read before the
//! thread exists (the state is alive then). A thread's first hooked call binds its OS id to its
//! `pthread_t` (`bind_current`, once per thread); the report joins the two.
//!
//! Fixed tables, no allocation, no lock: the newest [`SLOTS`] creations and bindings are kept.
//! Matching is by `pthread_t` and generation: a thread's binding comes after its creation began
//! (the generation is taken before `pthread_create` runs) and before any reuse of its `pthread_t`
//! (which needs it to have exited), so the right creation is the newest one with that `pthread_t`
//! begun before the binding.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Creations and bindings kept.
pub(crate) const SLOTS: usize = 1024;

static GEN: AtomicU64 = AtomicU64::new(1);

struct Created {
    gen: AtomicU64,
    pthread: AtomicUsize,
    start: AtomicUsize,
    run: AtomicUsize,
    type_name: AtomicUsize,
}

struct Bound {
    gen: AtomicU64,
    pthread: AtomicUsize,
    tid: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const NEW_CREATED: Created = Created {
    gen: AtomicU64::new(0),
    pthread: AtomicUsize::new(0),
    start: AtomicUsize::new(0),
    run: AtomicUsize::new(0),
    type_name: AtomicUsize::new(0),
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
}

fn in_module(addr: usize) -> Option<String> {
    if addr == 0 {
        return None;
    }
    // SAFETY: dladdr only reads loader data.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(
            CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// Reads a word at `addr` if it lies inside a loaded module (vtables, typeinfo: read-only data).
fn word_in_module(addr: usize) -> Option<usize> {
    in_module(addr)?;
    // SAFETY: the address is inside a mapped module image, 8-byte aligned by the callers' ABI.
    addr.is_multiple_of(std::mem::align_of::<usize>())
        .then(|| unsafe { *(addr as *const usize) })
}

/// Called by `pthread_create` before the real one: notes the start routine and, for a
/// `std::thread`, its state's `_M_run` and type name.
pub(crate) fn before_create(start: usize, arg: usize) -> Start {
    let mut s = Start {
        gen: GEN.fetch_add(1, Ordering::AcqRel),
        start,
        ..Start::default()
    };
    let libstdcxx = in_module(start).is_some_and(|m| m.contains("libstdc++"));
    if libstdcxx && arg != 0 && arg.is_multiple_of(std::mem::align_of::<usize>()) {
        // SAFETY: libstdc++ passes its heap-allocated `_State*`, alive until the thread runs.
        let vptr = unsafe { *(arg as *const usize) };
        // Itanium ABI: vptr[-1] is the typeinfo, whose second word is the mangled name; the
        // vtable of `_State` is { ~_State (complete), ~_State (deleting), _M_run }.
        if in_module(vptr).is_some() {
            s.run = word_in_module(vptr + 2 * 8)
                .filter(|&r| in_module(r).is_some())
                .unwrap_or(0);
            s.type_name = word_in_module(vptr - 8)
                .and_then(|ti| word_in_module(ti + 8))
                .filter(|&n| in_module(n).is_some())
                .unwrap_or(0);
        }
    }
    s
}

/// Called after a successful `pthread_create`.
pub(crate) fn created(pthread: usize, s: Start) {
    let slot = &CREATED[NEXT_CREATED.fetch_add(1, Ordering::Relaxed) % SLOTS];
    slot.gen.store(0, Ordering::Release);
    slot.pthread.store(pthread, Ordering::Relaxed);
    slot.start.store(s.start, Ordering::Relaxed);
    slot.run.store(s.run, Ordering::Relaxed);
    slot.type_name.store(s.type_name, Ordering::Relaxed);
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
            })
        })
        .max_by_key(|s| s.gen)
}

/// The mangled type name a [`Start`] points at, if any.
pub(crate) fn type_name(s: &Start) -> Option<String> {
    if s.type_name == 0 {
        return None;
    }
    // SAFETY: checked to lie in a loaded module when noted; typeinfo names are NUL-terminated.
    let raw = unsafe { CStr::from_ptr(s.type_name as *const std::ffi::c_char) };
    Some(raw.to_string_lossy().into_owned())
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
}
