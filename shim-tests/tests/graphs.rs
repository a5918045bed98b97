//! CUDA graphs whose kernels are not (or no longer) what cudablame saw captured
//! (`programs/graph_edits.c`; `src/record/graphs.rs`): destroyed handles whose addresses the
//! driver hands out again, graphs and executable graphs edited after capture, graphs built by
//! hand, graph launches captured into graphs, clones and executable-graph updates. A device-side
//! assert names check_kernel, which a healthy kernel on another stream also runs by name: a stale
//! kernel list for the graph launch that really asserted made that healthy kernel `exact`.

mod common;
use common::*;
use serde_json::Value;

fn program() -> std::path::PathBuf {
    compile("graph_edits", true)
}

/// `FAKE_CUDA_REUSE_HANDLES=1`: a destroyed graph's or executable graph's address is handed out
/// again.
const REUSE: &[(&str, &str)] = &[("FAKE_CUDA_REUSE_HANDLES", "1")];

/// Runs `scenario` without and with the shim: the same stdout (assert lines included), and the
/// assert surfaced at the synchronization. Returns the shim's run.
fn run_both(scenario: &str, env: &[(&str, &str)]) -> Run {
    let plain = run(&program(), &[scenario], false, env);
    let r = run(&program(), &[scenario], true, env);
    assert_eq!(r.stdout, plain.stdout);
    assert_eq!(r.printed("sync_rc"), "710", "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.report()["culprit"]["device_assert"]["kernel"],
        "check_kernel"
    );
    r
}

/// The graph launch op of the report (the culprit or a suspect: the ops listed with details).
fn graph_op(rep: &Value) -> &Value {
    let suspects = rep["suspects"].as_array().into_iter().flatten();
    std::iter::once(&rep["culprit"]["op"])
        .chain(suspects)
        .find(|o| o["kind"] == "graph")
        .unwrap_or_else(|| panic!("no graph launch among the culprit and suspects: {rep:#}"))
}

/// The verdict is `likely` (never `exact` on the healthy check_kernel), because the graph launch
/// may run the asserting kernel.
fn not_exact(r: &Run) -> &Value {
    let c = &r.report()["culprit"];
    assert_eq!(c["confidence"], "likely", "{}\n{}", c["reason"], r.stderr);
    assert_eq!(c["device_assert"]["matches_culprit"], false, "{c:#}");
    assert_eq!(c["one_of"], 2, "{c:#}");
    c
}

#[test]
fn a_destroyed_executable_graphs_reused_address_never_gets_its_kernels() {
    // Before: cuGraphExecDestroy was not hooked, so the new executable graph at the old address
    // kept the destroyed one's captured list [fill], complete: `check_kernel (exact)` on the
    // healthy kernel of stream A, while the graph built by hand asserted.
    let r = run_both("reused_exec", REUSE);
    assert_eq!(
        r.printed("reused"),
        "1",
        "the fake handed the address out again"
    );
    not_exact(&r);
    let g = graph_op(r.report());
    assert_ne!(g["kernel"], "graph: fill", "{g:#}");
    assert_eq!(g["graph"]["built_by_hand"], true, "{g:#}");
    assert_eq!(g["graph"]["ops"].as_array().map(Vec::len), Some(0), "{g:#}");
}

#[test]
fn a_kernel_node_changed_in_the_executable_graph_is_never_exact_by_the_captured_list() {
    // Before: the executable graph kept its capture-time list [fill] after
    // cuGraphExecKernelNodeSetParams set the node to check_kernel: `exact` on the healthy one.
    let r = run_both("exec_edit", &[]);
    let c = not_exact(&r);
    assert!(
        c["not_exact"]
            .as_str()
            .is_some_and(|s| s.contains("changed after capture")),
        "{c:#}"
    );
    let g = graph_op(r.report());
    assert_eq!(g["graph"]["changed_after_capture"], true, "{g:#}");
    assert_eq!(g["graph"]["built_by_hand"], false, "{g:#}");
    // What was captured is still shown, marked as changed.
    assert_eq!(g["kernel"], "graph: fill", "{g:#}");
}

#[test]
fn a_kernel_node_changed_in_the_graph_before_instantiation_is_never_exact() {
    // cuGraphKernelNodeSetParams on the captured graph, then cuGraphInstantiate: the executable
    // graph is a snapshot of the changed graph. Before: `exact` on the healthy one.
    let r = run_both("graph_edit", &[]);
    not_exact(&r);
    assert_eq!(graph_op(r.report())["graph"]["changed_after_capture"], true);
}

#[test]
fn a_graph_built_by_hand_is_never_complete() {
    // A graph built by hand (cuGraphCreate, cuGraphAddKernelNode) at the address of a destroyed
    // captured graph. Before: cuGraphCreate and cuGraphDestroy were not hooked, the new graph
    // inherited the dead one's list [fill], complete: `exact` on the healthy one.
    let r = run_both("hand_built", REUSE);
    assert_eq!(
        r.printed("reused"),
        "1",
        "the fake handed the address out again"
    );
    not_exact(&r);
    let g = graph_op(r.report());
    assert_eq!(g["graph"]["built_by_hand"], true, "{g:#}");
    assert_eq!(g["graph"]["changed_after_capture"], false, "{g:#}");
}

#[test]
fn a_graph_launch_captured_into_a_graph_counts_its_kernels() {
    // The outer graph runs fill and, through a captured cuGraphLaunch, the inner graph's
    // check_kernel. Before: only the outer graph's own kernels were listed, [fill], complete:
    // `exact` on the healthy one.
    let r = run_both("nested", &[]);
    let c = not_exact(&r);
    assert!(
        c["not_exact"]
            .as_str()
            .is_some_and(|s| s.contains("which 2 window ops run")),
        "{c:#}"
    );
}

#[test]
fn an_executable_graph_updated_from_another_graph_runs_that_graphs_kernels() {
    // cuGraphExecUpdate_v2 from a graph captured from check_kernel. Before: the executable graph
    // kept [fill]: `exact` on the healthy kernel. Now its list is the update's graph's.
    let r = run_both("update", &[]);
    not_exact(&r);
    // Beside a kernel that does not run check_kernel, the updated graph is exact (before: likely,
    // its list [fill] ran no check_kernel).
    let r = run_both("update_spin", &[]);
    let c = &r.report()["culprit"];
    assert_eq!(c["confidence"], "exact", "{}\n{}", c["reason"], r.stderr);
    assert_eq!(r.culprit()["kind"], "graph");
    assert_eq!(r.culprit()["kernel"], "graph: check_kernel");
    assert_eq!(c["device_assert"]["matches_culprit"], true);
}

#[test]
fn a_cloned_graph_keeps_its_captured_kernels() {
    // cuGraphClone copies what the original runs. Before: the clone was unknown ("may run"
    // anything), so `likely`; now `exact` on the graph launch, as for the original.
    let r = run_both("clone_spin", &[]);
    let c = &r.report()["culprit"];
    assert_eq!(c["confidence"], "exact", "{}\n{}", c["reason"], r.stderr);
    assert_eq!(r.culprit()["kernel"], "graph: check_kernel");
    assert_eq!(r.culprit()["graph"]["changed_after_capture"], false);
}
