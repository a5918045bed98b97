//! Stream capture, graphs and the capture-safety rules of the real driver.
//!
//! A capture is begun on one stream (its *origin*). Ops submitted to a capturing stream are
//! appended to the capture's node list instead of executing. `cuEventRecord` on a capturing
//! stream followed by `cuStreamWaitEvent(other, event)` makes `other` join the capture (fork),
//! as in CUDA. `cuStreamEndCapture` on the origin turns the nodes into a graph; launching an
//! instantiated graph enqueues the nodes, in capture order, on the launch stream.
//!
//! Invalidation rules (see `cuThreadExchangeStreamCaptureMode` in the CUDA docs):
//! * [`check_unsafe_call`]: a "potentially unsafe" call (allocation, free, context or event
//!   synchronization, synchronous work on the legacy stream) from a thread whose capture mode is
//!   `GLOBAL` fails with `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` (900) while that thread has a
//!   non-relaxed capture of its own or any other thread has a `GLOBAL` capture; in mode
//!   `THREAD_LOCAL` only the thread's own non-relaxed captures count; in `RELAXED` nothing does.
//!   The offending captures are invalidated (their `cuStreamEndCapture` returns 901).
//! * [`check_legacy_use`]: using the legacy stream while a *blocking* stream of the same context
//!   captures fails with `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT` (906) and invalidates that capture,
//!   whatever the modes (it is a dependency problem, not a safety-mode one).
//! * [`check_not_capturing`]: synchronizing or querying a capturing stream itself fails with 900
//!   and invalidates its capture.

use crate::context::{thread_id, Context};
use crate::errors;
use crate::handles::Registry;
use crate::stream::{Op, Stream, StreamKind};
use crate::types::{
    Res, CAPTURE_MODE_GLOBAL, CAPTURE_MODE_RELAXED, CAPTURE_MODE_THREAD_LOCAL,
    CAPTURE_STATUS_ACTIVE, CAPTURE_STATUS_INVALIDATED, CAPTURE_STATUS_NONE,
};
use parking_lot::Mutex;
use std::cell::Cell;
use std::ffi::c_uint;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Captures begun and not yet ended, process-wide.
static ACTIVE: Mutex<Vec<Arc<Capture>>> = parking_lot::const_mutex(Vec::new());

/// Live `CUgraph` handles.
pub static GRAPHS: Registry<Graph> = Registry::new();
/// Live `CUgraphExec` handles.
pub static EXECS: Registry<GraphExec> = Registry::new();

thread_local! {
    /// The calling thread's capture interaction mode (`cuThreadExchangeStreamCaptureMode`).
    static THREAD_MODE: Cell<c_uint> = const { Cell::new(CAPTURE_MODE_GLOBAL) };
}

/// One capture sequence.
pub struct Capture {
    /// Mode passed to `cuStreamBeginCapture_v2`.
    pub mode: c_uint,
    /// OS thread that began the capture.
    pub thread: u64,
    /// Context of the origin stream.
    pub ctx: &'static Context,
    /// The stream the capture was begun on.
    pub origin: &'static Stream,
    nodes: Mutex<Vec<Op>>,
    invalidated: AtomicBool,
    ended: AtomicBool,
}

impl Capture {
    /// Whether `cuStreamEndCapture` already ended it.
    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Whether an illegal call invalidated it.
    pub fn is_invalidated(&self) -> bool {
        self.invalidated.load(Ordering::SeqCst)
    }

    fn invalidate(&self) {
        if !self.invalidated.swap(true, Ordering::SeqCst) {
            crate::trace!("capture on stream {:p} invalidated", self.origin);
        }
    }

    /// For captured calls that add no node: `Err(901)` once the capture is invalidated.
    pub fn append_nothing(&self) -> Res<()> {
        if self.is_invalidated() {
            return Err(errors::STREAM_CAPTURE_INVALIDATED);
        }
        Ok(())
    }

    /// Appends a node; `Err(901)` once the capture is invalidated.
    pub fn append(&self, op: Op) -> Res<()> {
        if self.is_invalidated() {
            return Err(errors::STREAM_CAPTURE_INVALIDATED);
        }
        self.nodes.lock().push(op);
        Ok(())
    }
}

/// One node of a graph: its `CUgraphNode` handle and the op it runs.
#[derive(Clone)]
pub struct Node {
    /// The handle: the address of a leaked byte, unique for the life of the process. An
    /// executable graph keeps the handles of the graph it was instantiated from (its nodes are
    /// named by them, as in CUDA); a clone's nodes get new ones.
    pub handle: usize,
    /// What the node runs.
    pub op: Op,
}

impl Node {
    /// A node with a new handle.
    pub fn new(op: Op) -> Node {
        Node {
            handle: Box::leak(Box::new(0u8)) as *mut u8 as usize,
            op,
        }
    }
}

/// A graph (captured, built by hand or cloned): its nodes in the order they were added, the
/// order `cuGraphLaunch` runs them in.
pub struct Graph {
    /// The nodes.
    pub nodes: Mutex<Vec<Node>>,
}

impl Graph {
    /// The `CUgraphNode` handle of node `i` (NULL past the last).
    pub fn node_handle(&self, i: usize) -> *mut std::ffi::c_void {
        self.nodes
            .lock()
            .get(i)
            .map_or(std::ptr::null_mut(), |n| n.handle as *mut _)
    }
}

/// An instantiated graph: a copy of its graph's nodes, handles included.
pub struct GraphExec {
    /// The nodes `cuGraphLaunch` enqueues, in order.
    pub nodes: Mutex<Vec<Node>>,
}

/// Destroyed graphs and executable graphs whose addresses `FAKE_CUDA_REUSE_HANDLES=1` hands out
/// again (the most recently destroyed first).
static FREED_GRAPHS: Mutex<Vec<&'static Graph>> = parking_lot::const_mutex(Vec::new());
static FREED_EXECS: Mutex<Vec<&'static GraphExec>> = parking_lot::const_mutex(Vec::new());

/// Whether `FAKE_CUDA_REUSE_HANDLES` is set (to anything but empty or `0`): a destroyed graph's
/// or executable graph's address is handed out again by the next graph or executable graph
/// created, as a real driver may do with freed memory.
pub fn reuse_handles() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("FAKE_CUDA_REUSE_HANDLES").is_ok_and(|v| !v.is_empty() && v != "0")
    })
}

/// A new live graph holding `nodes` (at a destroyed graph's address under
/// `FAKE_CUDA_REUSE_HANDLES`).
pub fn new_graph(nodes: Vec<Node>) -> &'static Graph {
    if let Some(g) = FREED_GRAPHS.lock().pop() {
        *g.nodes.lock() = nodes;
        GRAPHS.add(g);
        crate::trace!("graph {:p} reused", g);
        return g;
    }
    GRAPHS.insert(Graph {
        nodes: parking_lot::const_mutex(nodes),
    })
}

/// A new live executable graph running `nodes` (at a destroyed one's address under
/// `FAKE_CUDA_REUSE_HANDLES`).
pub fn new_exec(nodes: Vec<Node>) -> &'static GraphExec {
    if let Some(e) = FREED_EXECS.lock().pop() {
        *e.nodes.lock() = nodes;
        EXECS.add(e);
        crate::trace!("executable graph {:p} reused", e);
        return e;
    }
    EXECS.insert(GraphExec {
        nodes: parking_lot::const_mutex(nodes),
    })
}

/// `cuGraphDestroy`: `Err(INVALID_HANDLE)` unless `handle` is a live graph.
pub fn destroy_graph(handle: *const std::ffi::c_void) -> Res<()> {
    let g = GRAPHS.remove(handle).ok_or(errors::INVALID_HANDLE)?;
    if reuse_handles() {
        g.nodes.lock().clear();
        FREED_GRAPHS.lock().push(g);
    }
    Ok(())
}

/// `cuGraphExecDestroy`: `Err(INVALID_HANDLE)` unless `handle` is a live executable graph.
/// Launches already enqueued keep their copies of its ops.
pub fn destroy_exec(handle: *const std::ffi::c_void) -> Res<()> {
    let e = EXECS.remove(handle).ok_or(errors::INVALID_HANDLE)?;
    if reuse_handles() {
        e.nodes.lock().clear();
        FREED_EXECS.lock().push(e);
    }
    Ok(())
}

/// The live graph holding the node `handle`, if any.
pub fn graph_of_node(handle: usize) -> Option<&'static Graph> {
    GRAPHS
        .live()
        .into_iter()
        .find(|g| g.nodes.lock().iter().any(|n| n.handle == handle))
}

/// The calling thread's capture mode.
pub fn thread_mode() -> c_uint {
    THREAD_MODE
        .try_with(Cell::get)
        .unwrap_or(CAPTURE_MODE_GLOBAL)
}

/// Whether `mode` is a valid `CUstreamCaptureMode`.
pub fn valid_mode(mode: c_uint) -> bool {
    matches!(
        mode,
        CAPTURE_MODE_GLOBAL | CAPTURE_MODE_THREAD_LOCAL | CAPTURE_MODE_RELAXED
    )
}

/// `cuThreadExchangeStreamCaptureMode`: sets the thread's mode, returns the previous one.
pub fn exchange_mode(mode: c_uint) -> Res<c_uint> {
    if !valid_mode(mode) {
        return Err(errors::INVALID_VALUE);
    }
    THREAD_MODE
        .try_with(|m| m.replace(mode))
        .map_err(|_| errors::UNKNOWN)
}

/// `cuStreamBeginCapture_v2`.
pub fn begin(stream: &'static Stream, mode: c_uint) -> Res<()> {
    if !valid_mode(mode) {
        return Err(errors::INVALID_VALUE);
    }
    if stream.kind == StreamKind::Legacy {
        return Err(errors::STREAM_CAPTURE_UNSUPPORTED);
    }
    if stream.active_capture().is_some() {
        return Err(errors::ILLEGAL_STATE);
    }
    let capture = Arc::new(Capture {
        mode,
        thread: thread_id(),
        ctx: stream.ctx,
        origin: stream,
        nodes: parking_lot::const_mutex(Vec::new()),
        invalidated: AtomicBool::new(false),
        ended: AtomicBool::new(false),
    });
    stream.set_capture(Some(capture.clone()));
    ACTIVE.lock().push(capture);
    crate::trace!("capture begun on stream {:p} mode {}", stream, mode);
    Ok(())
}

/// `cuStreamEndCapture`: the graph, or `Err(901)` if the capture was invalidated (the capture
/// ends either way).
pub fn end(stream: &'static Stream) -> Res<&'static Graph> {
    let capture = stream.active_capture().ok_or(errors::ILLEGAL_STATE)?;
    if !std::ptr::eq(capture.origin, stream) {
        return Err(errors::STREAM_CAPTURE_UNMATCHED);
    }
    if capture.mode != CAPTURE_MODE_RELAXED && capture.thread != thread_id() {
        return Err(errors::STREAM_CAPTURE_WRONG_THREAD);
    }
    capture.ended.store(true, Ordering::SeqCst);
    ACTIVE.lock().retain(|c| !Arc::ptr_eq(c, &capture));
    stream.set_capture(None);
    if capture.is_invalidated() {
        return Err(errors::STREAM_CAPTURE_INVALIDATED);
    }
    let nodes = std::mem::take(&mut *capture.nodes.lock());
    Ok(new_graph(nodes.into_iter().map(Node::new).collect()))
}

/// `cuStreamIsCapturing`.
pub fn status(stream: &Stream) -> c_uint {
    match stream.active_capture() {
        None => CAPTURE_STATUS_NONE,
        Some(c) if c.is_invalidated() => CAPTURE_STATUS_INVALIDATED,
        Some(_) => CAPTURE_STATUS_ACTIVE,
    }
}

/// Joins `stream` to the capture `event` was last recorded in (`cuStreamWaitEvent` fork).
/// The legacy stream cannot join: that fails with 906 and invalidates the capture.
pub fn join(stream: &'static Stream, capture: Arc<Capture>) -> Res<()> {
    if stream.kind == StreamKind::Legacy {
        capture.invalidate();
        return Err(errors::STREAM_CAPTURE_IMPLICIT);
    }
    match stream.active_capture() {
        Some(own) if Arc::ptr_eq(&own, &capture) => Ok(()),
        // CUDA_ERROR_STREAM_CAPTURE_MERGE
        Some(_) => Err(902),
        None => {
            stream.set_capture(Some(capture));
            Ok(())
        }
    }
}

/// Rule for "potentially unsafe" API calls; see the module docs.
pub fn check_unsafe_call() -> Res<()> {
    let mode = thread_mode();
    if mode == CAPTURE_MODE_RELAXED {
        return Ok(());
    }
    let me = thread_id();
    let active = ACTIVE.lock();
    let mut offending = active
        .iter()
        .filter(|c| {
            (c.thread == me && c.mode != CAPTURE_MODE_RELAXED)
                || (mode == CAPTURE_MODE_GLOBAL && c.mode == CAPTURE_MODE_GLOBAL)
        })
        .peekable();
    if offending.peek().is_none() {
        return Ok(());
    }
    offending.for_each(|c| c.invalidate());
    Err(errors::STREAM_CAPTURE_UNSUPPORTED)
}

/// Rule for work on (or synchronization of) the legacy stream of `ctx`; see the module docs.
pub fn check_legacy_use(ctx: &Context) -> Res<()> {
    let active = ACTIVE.lock();
    let mut offending = active
        .iter()
        .filter(|c| std::ptr::eq(c.ctx, ctx) && c.origin.is_blocking())
        .peekable();
    if offending.peek().is_none() {
        return Ok(());
    }
    offending.for_each(|c| c.invalidate());
    Err(errors::STREAM_CAPTURE_IMPLICIT)
}

/// Rule for synchronizing/querying a stream that is capturing; see the module docs.
pub fn check_not_capturing(stream: &Stream) -> Res<()> {
    match stream.active_capture() {
        Some(capture) => {
            capture.invalidate();
            Err(errors::STREAM_CAPTURE_UNSUPPORTED)
        }
        None => Ok(()),
    }
}

/// Checks for a synchronizing call on `stream` (stream sync/query, synchronous copies):
/// the stream itself must not capture, and the legacy stream must be usable.
pub fn check_sync_on(stream: &Stream) -> Res<()> {
    check_not_capturing(stream)?;
    if stream.kind == StreamKind::Legacy {
        check_unsafe_call()?;
        check_legacy_use(stream.ctx)?;
    }
    Ok(())
}

/// Submits `op` to `stream`: appended to the stream's capture if it captures, else enqueued
/// (after the legacy-stream capture rule). Returns the sequence number, or `None` if captured.
pub fn submit(stream: &'static Stream, op: Op) -> Res<Option<u64>> {
    stream.ctx.check()?;
    if let Some(capture) = stream.active_capture() {
        capture.append(op)?;
        return Ok(None);
    }
    if stream.kind == StreamKind::Legacy {
        check_legacy_use(stream.ctx)?;
    }
    stream.enqueue(op).map(Some)
}
