//! CUDA graphs: the kernels captured into a graph, with their capture-time stacks, so that when a
//! graph launch is the culprit the report can name what the graph runs and where it was captured.
//!
//! Stream capture (driver API "Stream Capture"): between `cuStreamBeginCapture` and
//! `cuStreamEndCapture` launches onto the capturing stream, and onto streams joined to the
//! capture through events, do not run; they become graph nodes. cudablame records them here
//! instead of in the stream rings (no progress marker is ever added to a user's graph). At the end
//! of the capture they belong to the returned `CUgraph`; `cuGraphInstantiate*` maps executable
//! graphs to it; `cuGraphLaunch` records one op of kind `graph` whose handle is the
//! `CUgraphExec`. Attribution is exact for captures that do not overlap in time; with overlapping
//! captures on several threads an op captured on a joined stream goes to the capture that began
//! last.

use super::{OpRecord, StreamId};
use crate::safety::lock::Mutex;
use crate::safety::Resettable;
use crate::stack::NativeStack;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Ops kept per capture (a graph with more has its list cut: blame treats a list this long as
/// possibly cut), and graphs remembered (oldest forgotten first).
pub(crate) const OPS_PER_GRAPH: usize = 1024;
const GRAPHS_KEPT: usize = 1024;
/// Captured ops kept in all remembered graphs and executable graphs together (an op record is
/// about 1 KB with its stack: some 16 MB at most), oldest graphs forgotten first.
const OPS_KEPT: usize = 16 * 1024;
/// Captures in progress at once (a program that begins captures and never ends them).
const ACTIVE_KEPT: usize = 64;

/// What a graph runs, as captured.
pub(crate) struct GraphInfo {
    /// The captured ops, in capture order.
    pub(crate) ops: Vec<OpRecord>,
    /// The stack of the thread that began the capture, at `cuStreamBeginCapture`.
    pub(crate) captured_at: NativeStack,
    pub(crate) thread: u32,
}

struct Active {
    context: usize,
    stream: StreamId,
    info: GraphInfo,
}

#[derive(Default)]
struct Tables {
    active: Vec<Active>,
    graphs: HashMap<usize, Arc<GraphInfo>>,
    execs: HashMap<usize, Arc<GraphInfo>>,
    /// Insertion order of `graphs` and `execs` keys, with their op counts, for forgetting the
    /// oldest.
    order: VecDeque<(bool, usize, usize)>,
    /// Ops of all entries of `order` (an info shared by a graph and its executable graphs
    /// counts once per entry: an upper bound).
    ops: usize,
}

/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
static TABLES: Resettable<Mutex<Option<Tables>>> = Resettable::new();

fn with<T>(f: impl FnOnce(&mut Tables) -> T) -> T {
    f(TABLES.get().lock().get_or_insert_with(Tables::default))
}

/// A capture began on `stream` of `context`.
pub(crate) fn begin(context: usize, stream: StreamId, stack: NativeStack, thread: u32) {
    with(|t| {
        if t.active.len() >= ACTIVE_KEPT {
            t.active.remove(0);
        }
        t.active.push(Active {
            context,
            stream,
            info: GraphInfo {
                ops: Vec::new(),
                captured_at: stack,
                thread,
            },
        })
    });
}

/// An op was captured (the launch succeeded while its stream was capturing).
pub(crate) fn captured(op: OpRecord) {
    with(|t| {
        let target = t
            .active
            .iter()
            .rposition(|a| a.context == op.context && a.stream == op.stream)
            .or(t.active.len().checked_sub(1));
        if let Some(i) = target {
            let ops = &mut t.active[i].info.ops;
            if ops.len() < OPS_PER_GRAPH {
                ops.push(op);
            }
        }
    });
}

/// The capture on `stream` ended with `graph` (0 when it failed: the capture is dropped).
pub(crate) fn end(context: usize, stream: StreamId, graph: usize) {
    with(|t| {
        let Some(i) = t
            .active
            .iter()
            .rposition(|a| a.context == context && a.stream == stream)
        else {
            return;
        };
        let done = t.active.remove(i);
        if graph != 0 {
            remember(t, false, graph, Arc::new(done.info));
        }
    });
}

/// `exec` was instantiated from `graph`.
pub(crate) fn instantiate(graph: usize, exec: usize) {
    with(|t| {
        if let Some(info) = t.graphs.get(&graph).cloned() {
            remember(t, true, exec, info);
        }
    });
}

fn remember(t: &mut Tables, exec: bool, key: usize, info: Arc<GraphInfo>) {
    let n = info.ops.len();
    while !t.order.is_empty() && (t.order.len() >= 2 * GRAPHS_KEPT || t.ops + n > OPS_KEPT) {
        if let Some((was_exec, old, old_n)) = t.order.pop_front() {
            t.ops -= old_n;
            if was_exec {
                t.execs.remove(&old);
            } else {
                t.graphs.remove(&old);
            }
        }
    }
    t.ops += n;
    t.order.push_back((exec, key, n));
    if exec {
        t.execs.insert(key, info);
    } else {
        t.graphs.insert(key, info);
    }
}

/// What the executable graph `exec` runs, if its capture was seen.
pub(crate) fn of_exec(exec: usize) -> Option<Arc<GraphInfo>> {
    with(|t| t.execs.get(&exec).cloned())
}

/// Forgets everything (a forked child). Takes no lock.
pub(crate) fn clear() {
    TABLES.reset_in_child();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(n: usize) -> Arc<GraphInfo> {
        Arc::new(GraphInfo {
            ops: Vec::with_capacity(n),
            captured_at: NativeStack::EMPTY,
            thread: 0,
        })
    }

    #[test]
    fn remembered_graphs_stay_bounded() {
        let mut t = Tables::default();
        for key in 1..=5 * GRAPHS_KEPT {
            remember(&mut t, false, key, info(0));
            remember(&mut t, true, key + 1_000_000, info(0));
        }
        assert!(t.order.len() <= 2 * GRAPHS_KEPT);
        assert!(t.graphs.len() + t.execs.len() <= 2 * GRAPHS_KEPT);
        // The newest are kept.
        assert!(t.graphs.contains_key(&(5 * GRAPHS_KEPT)));
    }
}
