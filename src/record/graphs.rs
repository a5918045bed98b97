//! CUDA graphs: what each graph and executable graph runs, so that when a graph launch is the
//! culprit the report can name its kernels (with their capture-time stacks), and blame knows
//! whether that list is all it runs.
//!
//! Stream capture (driver API "Stream Capture"): between `cuStreamBeginCapture` and
//! `cuStreamEndCapture` launches onto the capturing stream, and onto streams joined to the
//! capture through events, do not run; they become graph nodes. cudablame records them here
//! instead of in the stream rings (no progress marker is ever added to a user's graph). At the end
//! of the capture they are one [`GraphInfo`], and the returned `CUgraph` maps to it;
//! `cuGraphInstantiate*` maps the executable graph to the same info; `cuGraphLaunch` records one
//! op of kind `graph` whose handle is the `CUgraphExec` and whose [`AtLaunch`] says which info
//! the executable graph had when it was launched (a later edit, destroy or address reuse does not
//! change what an op already recorded ran).
//!
//! The table follows the graph API (driver API "Graph Management"):
//! - `cuGraphDestroy` / `cuGraphExecDestroy` forget the handle: the driver may hand its address
//!   out again for a new graph, which must not inherit the dead one's kernels. Every call that
//!   creates a handle ([`Tables::end`], [`Tables::create`], [`Tables::clone_graph`],
//!   [`Tables::instantiate`]) also replaces whatever the table held at that address, so a
//!   destroy cudablame did not see cannot leave a stale entry behind either.
//! - `cuGraphCreate`: a graph built by hand. cudablame does not follow its nodes: its info has no
//!   ops and is never complete ([`GraphInfo::by_hand`]).
//! - `cuGraphClone`: the clone runs what the original runs (same info).
//! - Edits cudablame does not follow mark the handle `changed` (its list is what was captured, not
//!   necessarily what runs; never complete): a node added to a graph, a node's parameters set or a
//!   node destroyed in a graph (a node's graph is not known: every graph, and every capture in
//!   progress, is marked), a node set, enabled or disabled in an executable graph, a capture into
//!   an existing graph (`cuStreamBeginCaptureToGraph`).
//! - An edit of a graph does not change the executable graphs instantiated from it before: the
//!   CUDA Programming Guide ("CUDA Graphs") says "Instantiation takes a snapshot of the graph
//!   template"; the executable graphs instantiated after it are changed too. An edit of an
//!   executable graph "only affect[s] future launches" (`cuGraphExecKernelNodeSetParams`).
//! - `cuGraphExecUpdate` "updates the node parameters in the instantiated graph ... with the
//!   node parameters in a topologically identical graph": the executable graph runs that graph's
//!   info from then on (still changed if that graph was, or if a node of the executable graph was
//!   ever enabled or disabled: the update need not restore that).
//!
//! Attribution is exact for captures that do not overlap in time; with overlapping captures on
//! several threads an op captured on a joined stream goes to the capture that began last, and
//! every capture then in progress counts as changed: none of their kernel lists is trusted as
//! complete (found by the eighth session's trial: the other capture's graph looked complete, and
//! an assert's kernel missing from it could make a verdict `exact`).

use super::{OpRecord, StreamId};
use crate::safety::lock::Mutex;
use crate::safety::Resettable;
use crate::stack::NativeStack;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Ops kept per capture (a graph with more has its list cut: blame treats a list this long as
/// possibly cut).
pub(crate) const OPS_PER_GRAPH: usize = 1024;
/// Infos remembered (oldest forgotten first, with every handle that maps to them).
const INFOS_KEPT: usize = 1024;
/// Captured ops kept in all remembered infos together (an op record is about 1 KB with its
/// stack: some 16 MB at most), oldest infos forgotten first.
const OPS_KEPT: usize = 16 * 1024;
/// Graph and executable-graph handles remembered at most (a program that instantiates and never
/// destroys): past it the oldest infos are forgotten with their handles.
const HANDLES_KEPT: usize = 4 * 1024;
/// Captures in progress at once (a program that begins captures and never ends them).
const ACTIVE_KEPT: usize = 64;
/// Graph launches captured inside graphs followed at most, one inside the other (the report
/// lists their kernels; deeper ones are unknown).
pub(crate) const NESTING_FOLLOWED: usize = 8;

/// What a graph runs, as cudablame saw it made: captured ops, or none for a graph built by hand.
/// Never changed once made (an edit marks the handle, see [`AtLaunch`]).
pub(crate) struct GraphInfo {
    /// The captured ops, in capture order (empty for a graph built by hand).
    pub(crate) ops: Vec<OpRecord>,
    /// The stack of the thread that began the capture, at `cuStreamBeginCapture` (for a graph
    /// built by hand: at `cuGraphCreate`).
    pub(crate) captured_at: NativeStack,
    /// OS thread id of that thread.
    pub(crate) thread: u32,
    /// Built by hand (`cuGraphCreate`), never captured: what it runs is unknown.
    pub(crate) by_hand: bool,
}

/// What a graph or executable graph handle maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Handle {
    /// The info's id in [`Tables::infos`].
    info: u64,
    /// Edited since the info was made, in a way cudablame does not follow.
    changed: bool,
    /// An executable graph one of whose nodes was enabled or disabled (`cuGraphNodeSetEnabled`):
    /// it stays changed through `cuGraphExecUpdate`.
    enable_set: bool,
}

impl Handle {
    fn new(info: u64, changed: bool) -> Handle {
        Handle {
            info,
            changed,
            enable_set: false,
        }
    }
}

/// Which info an executable graph had when it was launched, and whether it was changed: kept in
/// the graph launch's [`OpRecord`] (a packed id; [`AtLaunch::UNKNOWN`] when the executable graph
/// was not in the table: its capture was not seen, or it was forgotten).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AtLaunch(u64);

impl AtLaunch {
    /// Not known.
    pub(crate) const UNKNOWN: AtLaunch = AtLaunch(0);

    fn of(h: Handle) -> AtLaunch {
        AtLaunch(h.info << 1 | u64::from(h.changed))
    }

    fn info(self) -> u64 {
        self.0 >> 1
    }

    fn changed(self) -> bool {
        self.0 & 1 != 0
    }
}

/// A graph launch's info as the report reads it ([`seen`]).
pub(crate) struct Seen {
    pub(crate) info: Arc<GraphInfo>,
    /// The executable graph was changed after its capture, before that launch (see the module
    /// docs): `info.ops` are what was captured, not necessarily what ran.
    pub(crate) changed: bool,
}

impl Seen {
    /// Whether `info.ops` are all that the launch ran: captured, not changed since, not cut at
    /// [`OPS_PER_GRAPH`] (graph launches captured inside it are judged by the report).
    pub(crate) fn complete(&self) -> bool {
        !self.info.by_hand && !self.changed && self.info.ops.len() < OPS_PER_GRAPH
    }
}

struct Active {
    context: usize,
    stream: StreamId,
    info: GraphInfo,
    /// A graph being captured was edited (an edit of a graph cudablame does not know while
    /// captures were in progress: it may be this capture's graph), or the capture goes into an
    /// existing graph (`cuStreamBeginCaptureToGraph`), whose other nodes cudablame does not know.
    changed: bool,
}

#[derive(Default)]
struct Tables {
    active: Vec<Active>,
    /// Every info still remembered, by id (ids from 1, never reused).
    infos: HashMap<u64, Arc<GraphInfo>>,
    /// Ids of `infos` with their op counts, oldest first, for forgetting the oldest.
    order: VecDeque<(u64, usize)>,
    /// Ops of all infos of `order`.
    ops: usize,
    /// The last id given.
    last_id: u64,
    graphs: HashMap<usize, Handle>,
    execs: HashMap<usize, Handle>,
}

impl Tables {
    /// Remembers `info`, forgetting the oldest infos (and the handles that map to them) past the
    /// bounds; its id.
    fn add(&mut self, info: GraphInfo) -> u64 {
        let n = info.ops.len();
        while !self.order.is_empty() && (self.order.len() >= INFOS_KEPT || self.ops + n > OPS_KEPT)
        {
            self.forget_oldest();
        }
        self.last_id += 1;
        self.ops += n;
        self.order.push_back((self.last_id, n));
        self.infos.insert(self.last_id, Arc::new(info));
        self.last_id
    }

    fn forget_oldest(&mut self) {
        if let Some((id, n)) = self.order.pop_front() {
            self.ops -= n;
            self.infos.remove(&id);
            self.graphs.retain(|_, h| h.info != id);
            self.execs.retain(|_, h| h.info != id);
        }
    }

    /// Keeps the handles within [`HANDLES_KEPT`].
    fn bound_handles(&mut self) {
        while !self.order.is_empty() && self.graphs.len() + self.execs.len() > HANDLES_KEPT {
            self.forget_oldest();
        }
    }

    fn begin(&mut self, context: usize, stream: StreamId, into: bool, info: GraphInfo) {
        if self.active.len() >= ACTIVE_KEPT {
            self.active.remove(0);
        }
        self.active.push(Active {
            context,
            stream,
            info,
            changed: into,
        });
    }

    /// An op captured on a stream that began no capture (one joined to a capture through an
    /// event) goes to the capture that began last; with several captures in progress that may be
    /// the wrong one, so every capture in progress is then marked changed: none of their lists
    /// is trusted as complete (an assert's kernel missing from one could make a verdict `exact`).
    fn captured(&mut self, op: OpRecord) {
        let own = self
            .active
            .iter()
            .rposition(|a| a.context == op.context && a.stream == op.stream);
        if own.is_none() && self.active.len() > 1 {
            for a in &mut self.active {
                a.changed = true;
            }
        }
        let target = own.or(self.active.len().checked_sub(1));
        if let Some(i) = target {
            let ops = &mut self.active[i].info.ops;
            if ops.len() < OPS_PER_GRAPH {
                ops.push(op);
            }
        }
    }

    /// The capture on `stream` ended with `graph` (0 when it failed: the capture is dropped). A
    /// capture cudablame did not see begin leaves `graph` unknown.
    fn end(&mut self, context: usize, stream: StreamId, graph: usize) {
        let found = self
            .active
            .iter()
            .rposition(|a| a.context == context && a.stream == stream);
        let done = found.map(|i| self.active.remove(i));
        if graph == 0 {
            return;
        }
        match done {
            Some(done) => {
                let id = self.add(done.info);
                self.graphs.insert(graph, Handle::new(id, done.changed));
                self.bound_handles();
            }
            None => {
                self.graphs.remove(&graph);
            }
        }
    }

    /// `graph` was created empty (`cuGraphCreate`), to be built by hand.
    fn create(&mut self, graph: usize, info: GraphInfo) {
        let id = self.add(info);
        self.graphs.insert(graph, Handle::new(id, false));
        self.bound_handles();
    }

    /// `clone` was made from `original` (`cuGraphClone`).
    fn clone_graph(&mut self, original: usize, clone: usize) {
        match self.graphs.get(&original).copied() {
            Some(h) => {
                self.graphs.insert(clone, Handle::new(h.info, h.changed));
                self.bound_handles();
            }
            None => {
                self.graphs.remove(&clone);
            }
        }
    }

    /// `exec` was instantiated from `graph`: a snapshot of what `graph` runs now.
    fn instantiate(&mut self, graph: usize, exec: usize) {
        match self.graphs.get(&graph).copied() {
            Some(h) => {
                self.execs.insert(exec, Handle::new(h.info, h.changed));
                self.bound_handles();
            }
            None => {
                self.execs.remove(&exec);
            }
        }
    }

    /// `graph` was changed (a node added). An unknown graph may be one being captured (its
    /// handle is `cuStreamGetCaptureInfo`'s) or the child graph of a known graph's child-graph
    /// node (`cuGraphChildGraphNodeGetGraph`, not followed): every capture in progress and
    /// every known graph is changed then (executable graphs already made keep their snapshot).
    fn edit_graph(&mut self, graph: usize) {
        match self.graphs.get_mut(&graph) {
            Some(h) => h.changed = true,
            None => self.edit_node(),
        }
    }

    /// A node of some graph was changed or destroyed: cudablame does not know which graph holds
    /// it, so every graph and every capture in progress is changed.
    fn edit_node(&mut self) {
        self.graphs.values_mut().for_each(|h| h.changed = true);
        self.active.iter_mut().for_each(|a| a.changed = true);
    }

    /// A node of `exec` was changed (`enable_set`: enabled or disabled).
    fn edit_exec(&mut self, exec: usize, enable_set: bool) {
        if let Some(h) = self.execs.get_mut(&exec) {
            h.changed = true;
            h.enable_set |= enable_set;
        }
    }

    /// `exec` was updated from `graph` (`cuGraphExecUpdate`): it runs what `graph` runs, changed
    /// if `graph` is, if a node of `exec` was ever enabled or disabled, or if `exec` was not known
    /// (its enable states were not followed).
    fn update_exec(&mut self, exec: usize, graph: usize) {
        let enable_set = self.execs.get(&exec).is_none_or(|e| e.enable_set);
        match self.graphs.get(&graph).copied() {
            Some(g) => {
                self.execs.insert(
                    exec,
                    Handle {
                        info: g.info,
                        changed: g.changed || enable_set,
                        enable_set,
                    },
                );
                self.bound_handles();
            }
            None => {
                self.execs.remove(&exec);
            }
        }
    }

    fn at_launch(&self, exec: usize) -> AtLaunch {
        self.execs
            .get(&exec)
            .map_or(AtLaunch::UNKNOWN, |h| AtLaunch::of(*h))
    }

    fn seen(&self, at: AtLaunch) -> Option<Seen> {
        if at == AtLaunch::UNKNOWN {
            return None;
        }
        self.infos.get(&at.info()).map(|info| Seen {
            info: info.clone(),
            changed: at.changed(),
        })
    }
}

/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
static TABLES: Resettable<Mutex<Option<Tables>>> = Resettable::new();

fn with<T>(f: impl FnOnce(&mut Tables) -> T) -> T {
    f(TABLES.get().lock().get_or_insert_with(Tables::default))
}

/// A capture began on `stream` of `context`, by `thread` at `stack`; `into`: into an existing
/// graph (`cuStreamBeginCaptureToGraph`).
pub(crate) fn begin(context: usize, stream: StreamId, into: bool, stack: NativeStack, thread: u32) {
    let info = GraphInfo {
        ops: Vec::new(),
        captured_at: stack,
        thread,
        by_hand: false,
    };
    with(|t| t.begin(context, stream, into, info));
}

/// An op was captured (the launch succeeded while its stream was capturing).
pub(crate) fn captured(op: OpRecord) {
    with(|t| t.captured(op));
}

/// The capture on `stream` ended with `graph` (0 when it failed: the capture is dropped).
pub(crate) fn end(context: usize, stream: StreamId, graph: usize) {
    with(|t| t.end(context, stream, graph));
}

/// `cuGraphCreate` made `graph`, by `thread` at `stack`: built by hand, never complete.
pub(crate) fn create(graph: usize, stack: NativeStack, thread: u32) {
    let info = GraphInfo {
        ops: Vec::new(),
        captured_at: stack,
        thread,
        by_hand: true,
    };
    with(|t| t.create(graph, info));
}

/// `cuGraphClone` made `clone` from `original`.
pub(crate) fn clone_graph(original: usize, clone: usize) {
    with(|t| t.clone_graph(original, clone));
}

/// `cuGraphDestroy(graph)` succeeded.
pub(crate) fn destroy_graph(graph: usize) {
    with(|t| t.graphs.remove(&graph));
}

/// `cuGraphExecDestroy(exec)` succeeded (launches already recorded keep their [`AtLaunch`]).
pub(crate) fn destroy_exec(exec: usize) {
    with(|t| t.execs.remove(&exec));
}

/// `exec` was instantiated from `graph`.
pub(crate) fn instantiate(graph: usize, exec: usize) {
    with(|t| t.instantiate(graph, exec));
}

/// A node was added to `graph` (see [`Tables::edit_graph`]).
pub(crate) fn edit_graph(graph: usize) {
    with(|t| t.edit_graph(graph));
}

/// A node of an unknown graph was changed or destroyed (see [`Tables::edit_node`]).
pub(crate) fn edit_node() {
    with(|t| t.edit_node());
}

/// A node of `exec` was changed (`enable_set`: by `cuGraphNodeSetEnabled`).
pub(crate) fn edit_exec(exec: usize, enable_set: bool) {
    with(|t| t.edit_exec(exec, enable_set));
}

/// `exec` was updated from `graph` (`cuGraphExecUpdate`).
pub(crate) fn update_exec(exec: usize, graph: usize) {
    with(|t| t.update_exec(exec, graph));
}

/// What `exec` runs now, for a graph launch's record: one lock, one hash lookup.
#[inline]
pub(crate) fn at_launch(exec: usize) -> AtLaunch {
    with(|t| t.at_launch(exec))
}

/// The info a launch recorded, if it is still remembered.
pub(crate) fn seen(at: AtLaunch) -> Option<Seen> {
    if at == AtLaunch::UNKNOWN {
        return None;
    }
    with(|t| t.seen(at))
}

/// Forgets everything (a forked child). Takes no lock.
pub(crate) fn clear() {
    TABLES.reset_in_child();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::OpKind;

    fn info(n: usize) -> GraphInfo {
        GraphInfo {
            ops: (1..=n as u64)
                .map(|s| OpRecord::for_test(s, OpKind::Kernel, s))
                .collect(),
            captured_at: NativeStack::EMPTY,
            thread: 0,
            by_hand: false,
        }
    }

    /// A table where graph `g` was captured with `n` ops (on the legacy stream of context 1).
    fn captured(t: &mut Tables, g: usize, n: usize) {
        t.begin(1, StreamId::Legacy, false, info(0));
        for s in 1..=n as u64 {
            t.captured(OpRecord::for_test(s, OpKind::Kernel, s));
        }
        t.end(1, StreamId::Legacy, g);
    }

    fn ops_at(t: &Tables, at: AtLaunch) -> Option<usize> {
        t.seen(at).map(|s| s.info.ops.len())
    }

    fn complete(t: &Tables, exec: usize) -> Option<bool> {
        t.seen(t.at_launch(exec)).map(|s| s.complete())
    }

    #[test]
    fn an_edit_of_an_unknown_graph_changes_every_known_graph() {
        // A kernel node added to a child graph (`cuGraphChildGraphNodeGetGraph`'s handle, not
        // in the table) changes what its parent runs: the parent is not complete any more.
        let mut t = Tables::default();
        captured(&mut t, 100, 2);
        t.instantiate(100, 200);
        t.edit_graph(0xC41D);
        t.instantiate(100, 201);
        assert_eq!(
            complete(&t, 200),
            Some(true),
            "instantiated before: a snapshot"
        );
        assert_eq!(complete(&t, 201), Some(false));
    }

    #[test]
    fn an_op_of_a_joined_stream_with_two_captures_in_progress_trusts_neither_list() {
        let joined = |t: &mut Tables| {
            let mut op = OpRecord::for_test(9, OpKind::Kernel, 9);
            op.stream = StreamId::Handle(0x30);
            t.captured(op);
        };
        // One capture in progress: a joined stream's op can only be its own.
        let mut t = Tables::default();
        t.begin(1, StreamId::Handle(0x10), false, info(0));
        joined(&mut t);
        t.end(1, StreamId::Handle(0x10), 100);
        t.instantiate(100, 200);
        assert_eq!(complete(&t, 200), Some(true));
        // Two at once: which one the op went into is a guess, so neither is complete.
        let mut t = Tables::default();
        t.begin(1, StreamId::Handle(0x10), false, info(0));
        t.begin(1, StreamId::Handle(0x20), false, info(0));
        joined(&mut t);
        t.end(1, StreamId::Handle(0x20), 101);
        t.end(1, StreamId::Handle(0x10), 100);
        for (g, e) in [(100, 200), (101, 201)] {
            t.instantiate(g, e);
            assert_eq!(complete(&t, e), Some(false), "graph {g}");
        }
    }

    #[test]
    fn remembered_graphs_stay_bounded() {
        let mut t = Tables::default();
        for key in 1..=5 * INFOS_KEPT {
            captured(&mut t, key, 0);
            t.instantiate(key, key + 1_000_000);
        }
        assert!(t.order.len() <= INFOS_KEPT);
        assert!(t.infos.len() <= INFOS_KEPT);
        assert!(t.graphs.len() + t.execs.len() <= 2 * INFOS_KEPT);
        // The newest are kept, the oldest forgotten with their handles.
        assert_eq!(complete(&t, 5 * INFOS_KEPT + 1_000_000), Some(true));
        assert!(!t.graphs.contains_key(&1) && !t.execs.contains_key(&1_000_001));
        // Ops are bounded too.
        for key in 1..=40 {
            captured(&mut t, key, OPS_PER_GRAPH);
        }
        assert!(t.ops <= OPS_KEPT);
        // Instantiating one graph over and over (never destroyed) keeps the handles bounded.
        captured(&mut t, 7, 1);
        for e in 0..3 * HANDLES_KEPT {
            t.instantiate(7, 10_000_000 + e);
        }
        assert!(t.graphs.len() + t.execs.len() <= HANDLES_KEPT);
    }

    #[test]
    fn a_destroyed_handle_is_forgotten_and_its_address_gets_nothing_of_it() {
        let mut t = Tables::default();
        captured(&mut t, 10, 3);
        t.instantiate(10, 20);
        let first = t.at_launch(20);
        t.execs.remove(&20); // cuGraphExecDestroy
        assert_eq!(t.at_launch(20), AtLaunch::UNKNOWN);
        // A graph cudablame never saw made, instantiated at the same address: unknown.
        t.instantiate(99, 20);
        assert_eq!(t.at_launch(20), AtLaunch::UNKNOWN);
        // A launch recorded before still finds what it ran.
        assert_eq!(ops_at(&t, first), Some(3));
        // Without the destroy (one cudablame did not see), a new instantiation at the address
        // replaces the entry all the same.
        t.instantiate(10, 21);
        t.instantiate(99, 21);
        assert_eq!(t.at_launch(21), AtLaunch::UNKNOWN);
        // Likewise for graphs: a capture whose begin was not seen, a clone of an unknown graph.
        t.end(1, StreamId::Legacy, 10);
        assert!(!t.graphs.contains_key(&10));
        captured(&mut t, 11, 1);
        t.clone_graph(98, 11);
        assert!(!t.graphs.contains_key(&11));
    }

    #[test]
    fn a_graph_built_by_hand_is_never_complete() {
        let mut t = Tables::default();
        let mut by_hand = info(0);
        by_hand.by_hand = true;
        t.create(30, by_hand);
        t.instantiate(30, 31);
        assert_eq!(complete(&t, 31), Some(false));
        assert!(!t.seen(t.at_launch(31)).unwrap().changed);
    }

    #[test]
    fn an_edit_of_an_executable_graph_marks_later_launches_only() {
        let mut t = Tables::default();
        captured(&mut t, 10, 2);
        t.instantiate(10, 20);
        t.instantiate(10, 21);
        let before = t.at_launch(20);
        t.edit_exec(20, false);
        let after = t.at_launch(20);
        assert!(t.seen(before).unwrap().complete());
        let seen = t.seen(after).unwrap();
        assert!(seen.changed && !seen.complete());
        assert_eq!(seen.info.ops.len(), 2, "what was captured is still shown");
        // Neither the graph nor its other executable graph changed.
        assert_eq!(complete(&t, 21), Some(true));
        t.instantiate(10, 22);
        assert_eq!(complete(&t, 22), Some(true));
    }

    #[test]
    fn an_edit_of_a_graph_reaches_later_instantiations_only() {
        let mut t = Tables::default();
        captured(&mut t, 10, 2);
        t.instantiate(10, 20);
        t.clone_graph(10, 11);
        t.edit_graph(10);
        // A snapshot taken before: unchanged; after: changed. The clone is its own graph.
        assert_eq!(complete(&t, 20), Some(true));
        t.instantiate(10, 21);
        assert_eq!(complete(&t, 21), Some(false));
        t.instantiate(11, 22);
        assert_eq!(complete(&t, 22), Some(true));
        // A node edit (its graph unknown) changes every graph, not executable graphs.
        t.edit_node();
        t.instantiate(11, 23);
        assert_eq!(complete(&t, 23), Some(false));
        assert_eq!(complete(&t, 22), Some(true));
    }

    #[test]
    fn edits_during_a_capture_and_captures_into_a_graph_are_changes() {
        let mut t = Tables::default();
        // An unknown graph edited while a capture is in progress: it may be that capture's.
        t.begin(1, StreamId::Legacy, false, info(0));
        t.edit_graph(555);
        t.end(1, StreamId::Legacy, 10);
        t.instantiate(10, 20);
        assert_eq!(complete(&t, 20), Some(false));
        // A capture into an existing graph: its other nodes are unknown.
        t.begin(1, StreamId::Legacy, true, info(0));
        t.end(1, StreamId::Legacy, 11);
        t.instantiate(11, 21);
        assert_eq!(complete(&t, 21), Some(false));
        // (An unknown graph edited with no capture in progress: every known graph changes, as
        // it may be a child graph of one: `an_edit_of_an_unknown_graph_changes_every_known_graph`.)
    }

    #[test]
    fn an_update_runs_the_graphs_info() {
        let mut t = Tables::default();
        captured(&mut t, 10, 1);
        captured(&mut t, 11, 3);
        t.instantiate(10, 20);
        t.edit_exec(20, false);
        t.update_exec(20, 11);
        assert_eq!(complete(&t, 20), Some(true));
        assert_eq!(ops_at(&t, t.at_launch(20)), Some(3));
        // An enable state set before stays a change through updates.
        t.edit_exec(20, true);
        t.update_exec(20, 10);
        assert_eq!(complete(&t, 20), Some(false));
        // From an unknown graph: unknown. Of an unknown executable graph: changed.
        t.update_exec(20, 98);
        assert_eq!(t.at_launch(20), AtLaunch::UNKNOWN);
        t.update_exec(21, 10);
        assert_eq!(complete(&t, 21), Some(false));
    }

    #[test]
    fn a_launch_id_packs_the_info_and_the_change() {
        let h = Handle::new(5, true);
        let at = AtLaunch::of(h);
        assert_eq!((at.info(), at.changed()), (5, true));
        assert_ne!(AtLaunch::of(Handle::new(5, false)), at);
        assert_ne!(AtLaunch::of(Handle::new(1, false)), AtLaunch::UNKNOWN);
    }
}
