//! Python frames of the launching thread (CPython 3.10 to 3.13), read without the GIL.
//!
//! PyTorch releases the GIL around op dispatch, so the thread that launches a kernel usually does
//! not hold it, and taking it in a hook could deadlock. Nothing here takes the GIL or calls into
//! the interpreter beyond GIL-free lookups:
//!
//! * Once, cold ([`runtime`]): the CPython version from the `Py_Version` symbol (3.11+) or the
//!   `Py_GetVersion()` string (3.10), the addresses of `PyGILState_GetThisThreadState`,
//!   `PyCode_Type` and friends, all through [`crate::real::dlsym`] with `RTLD_DEFAULT` (never
//!   `libc::dlsym`: this library interposes `dlsym`). cudablame never links libpython: in a process
//!   that is not CPython the symbols are missing and capture is a no-op. Struct offsets come from
//!   `_Py_DebugOffsets` at the start of `_PyRuntime` for 3.13, and from per-version tables for
//!   3.10 to 3.12 (checked against each version's headers: see [`LAYOUT_310`] and below).
//! * Per launch, hot ([`PythonStack::capture`]): `PyGILState_GetThisThreadState()` (a TLS read,
//!   safe without the GIL and before initialization) gives the calling thread's own thread state;
//!   its frame chain cannot change while this thread is inside the hook, and every code object on
//!   it is kept alive by its frame. No reference counting (refcounts are not atomic under the
//!   GIL: never `Py_INCREF`). A stack the thread captured before is found in its stack cache
//!   ([`cache`]): one walk of the chain compares each frame's code object, instruction and
//!   code-object fingerprint with the copy kept there (the entry tried first is the one captured
//!   after the previous stack last time; else a hash picks 8 candidates), and the record gets
//!   the kept stack's slot in the table of distinct stacks and its innermost frame. Any other
//!   stack takes the full walk, which stores per frame the code object's entry in an intern
//!   table and the instruction offset into a buffer on the hook's stack, then interns the stack
//!   ([`stacks`]: a hash and a compare, an allocation only at the first sight of a stack); the
//!   cache then keeps it. The capture is compiled once per known layout, its offsets constants.
//! * First sight of a code object ([`intern`]): its file name, qualified name and line table are
//!   copied into memory cudablame owns (the code object is alive then: the frame references it),
//!   so a report never reads a code object that may have been freed since. Entries are keyed by
//!   address and checked against a fingerprint (`co_firstlineno`, the shape word and the
//!   addresses of `co_consts` and `co_names`: fields on the lines the interpreter reads anyway,
//!   see `intern::Fingerprint`) on every capture, by the stack cache as by the full walk: a code
//!   object freed and another allocated at its address gets a new entry. Entries are never
//!   freed.
//! * Report time ([`PythonStack::resolve`]): offsets become line numbers with CPython's own
//!   algorithm (`PyCode_Addr2Line`) over the copied line table: 3.10's PEP 626 `co_linetable`,
//!   3.11+'s location table (`Objects/locations.md`).
//!
//! Layout safety: the first capture with each thread state checks that its `thread_id` is this
//! thread (`pthread_self`; the thread's cache remembers the last thread state that passed), and
//! every walk, cached or full, that each frame's code object has the type `PyCode_Type`; a
//! mismatch (an unexpected build, e.g. `Py_TRACE_REFS`) stops the walk and the report says so.
//!
//! ## Backward pass
//!
//! Autograd runs backward kernels on its own worker threads (`pt_autograd_N`, named by
//! `Engine::thread_init`), which have a thread state but no Python frames, except inside a
//! custom `torch.autograd.Function.backward` written in Python (real frames, shown as such).
//! Reading the frames of the thread blocked in `backward()` from a worker would mean walking
//! another thread's chain without the GIL: that thread may return from `backward()` and free
//! frames and code objects while we read, so we never do it. Instead, each capture on a thread
//! other than an autograd worker whose frames include torch's backward entry points
//! (`Tensor.backward`, `torch.autograd.backward` / `grad`, `_engine_run_backward`: recognized
//! once per code object, at intern time) publishes its stack as the process's latest *backward
//! context*; in a plain `loss.backward()` that happens at the launch of `ones_like` for the
//! initial gradient, before the engine starts. A capture on an autograd worker records the
//! generation of the latest context (one atomic load); the report appends that context's frames
//! after the worker's own and names the thread they came from (`python_stack_from_thread`).
//! Limits: a backward with explicit gradients may launch nothing on the caller before the engine
//! runs, and then the context is the previous backward's; two threads running backward at once
//! may get each other's context. The report says the frames were borrowed, from which thread.
//!
//! NVTX ranges are not recorded.
//!
//! Cost per launch (fake driver, launches from C through the shim with the GIL released, native
//! stack off, 2-core x86-64 VM; `shim-tests/programs/py_bench.py DEPTH 13000 inline c`, the same
//! stack at every launch). Under callgrind, the capture of a stack the thread's cache predicts
//! (`PythonStack::cached` with its calls into CPython, `PyGILState_GetThisThreadState` and
//! `_Py_IsFinalizing`: some 35 instructions of them): 6 frames 290 instructions on CPython 3.11
//! and 325 on 3.12 (710 and 760 with the per-frame lookups before the cache), 12 frames 400 and
//! 445 (1,200 and 1,275), 24 frames 620 and 690 (2,175 and 2,310): about 21 instructions a frame
//! of an already-seen code object, 29 for the first frame of each (recursion and nested
//! `nn.Module` calls repeat code objects). Under cachegrind with the caches evicted between
//! launches (`BENCH_POLLUTE_KB=3072 BENCH_POLLUTE_CODE=1`, as by PyTorch's own work between
//! launches), with the Python reads counted apart (`rd` out of line in a measuring build):
//! 10.6 code lines of cudablame's (22 before), and of its data lines 4.8 to 8.6 read and 0 to 1
//! written at 6 to 24 frames (16 to 19 read and 6 to 8 written before), plus 2 read by the
//! caller (`record::hot::prepare`: the runtime's pointer and first line, read here before);
//! Python's own frames and code objects are 16 to 58 lines, one fewer than before (a thread
//! state's `thread_id` is read once). 300 distinct stacks launched in a loop from Python (8
//! frames, 3.12): about 375 instructions a launch in the same order every round, 770 in a new
//! random order every round (the hash path), 1,100 before either way.
#![deny(unsafe_op_in_unsafe_fn)]

mod backward;
mod cache;
mod capture;
mod intern;
mod layout;
mod lines;
mod runtime;
mod stacks;
#[cfg(test)]
mod tests;

pub(crate) use capture::PythonStack;
pub(crate) use runtime::{frames_captured, note};
