//! Short names of ops and kernels, and the list of recorded ops (also used by the command).

use crate::model::{Op, OpKind, Report};

/// Kernel names longer than this are cut in the stream listings (the JSON keeps them whole).
pub(super) const NAME_SHOWN: usize = 100;

pub(super) fn short(name: &str) -> String {
    match name.char_indices().nth(NAME_SHOWN) {
        Some((i, _)) => format!("{}...", &name[..i]),
        None => name.to_string(),
    }
}

/// `what` with the op's sequence number: `#4 kernel k`; a launch the driver refused was never
/// enqueued and has none (`seq` 0): `kernel k (not enqueued)`.
pub(super) fn numbered(seq: u64, what: &str) -> String {
    if seq == 0 {
        format!("{what} (not enqueued)")
    } else {
        format!("#{seq} {what}")
    }
}

pub(super) fn op_line(o: &Op) -> String {
    let what = match &o.kernel {
        Some(k) => format!("kernel {}", short(k)),
        None => match o.kind {
            OpKind::Kernel => "kernel (name unknown)".into(),
            OpKind::Graph => "graph launch".into(),
            _ => format!(
                "{:?} of {} bytes{}",
                o.kind,
                o.bytes,
                if o.synchronous { " (synchronous)" } else { "" }
            )
            .to_lowercase(),
        },
    };
    numbered(o.seq, &what)
}

/// A kernel's name without return type, namespaces, template arguments or parameters:
/// `void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` gives
/// `vectorized_elementwise_kernel`.
pub fn brief(name: &str) -> String {
    // A graph launch is named by all its kernels ("graph: a, b, c"), each shortened: never by
    // the last one alone (that would name one node as the culprit).
    if let Some(kernels) = name.strip_prefix("graph: ") {
        let parts: Vec<String> = split_top_level(kernels).iter().map(|k| brief(k)).collect();
        return format!("graph: {}", parts.join(", "));
    }
    // The qualified name: the text outside `<...>` up to the parameter list.
    let name = name.replace("(anonymous namespace)", "{anonymous}");
    let mut head = String::new();
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => break,
            _ if depth == 0 => head.push(c),
            _ => {}
        }
    }
    let head = head.trim();
    let last = head.rsplit(' ').next().unwrap_or(head);
    let base = last.rsplit("::").next().unwrap_or(last);
    if base.is_empty() {
        short(&name)
    } else {
        base.to_string()
    }
}

/// Splits `a, b<c, d>, e(f, g)` at the commas outside brackets.
pub(super) fn split_top_level(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in list.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(list[start..].trim());
    parts
}

/// An op in a few words: `#4 oob_write`, `#1 memcpy 64 B (sync)`, `#2 graph launch`.
pub fn op_brief(o: &Op) -> String {
    let what = match (&o.kernel, o.kind) {
        (Some(k), _) => brief(k),
        (None, OpKind::Kernel) => "kernel (name unknown)".into(),
        (None, OpKind::Graph) => "graph launch".into(),
        (None, kind) => format!(
            "{} {} B{}",
            if kind == OpKind::Memset {
                "memset"
            } else {
                "memcpy"
            },
            o.bytes,
            if o.synchronous { " (sync)" } else { "" }
        ),
    };
    numbered(o.seq, &what)
}

/// Every op the report lists (the streams' recent ops, the culprit, the suspects), each once, in
/// launch order; `true` marks the culprit.
pub fn recorded_ops(r: &Report) -> Vec<(&Op, bool)> {
    let culprit = r.culprit.op.as_ref();
    let mut ops: Vec<(&Op, bool)> = Vec::new();
    let all = culprit
        .into_iter()
        .chain(&r.suspects)
        .chain(r.streams.iter().flat_map(|s| &s.recent));
    for o in all {
        if !ops
            .iter()
            .any(|(p, _)| p.stream == o.stream && p.seq == o.seq)
        {
            ops.push((
                o,
                culprit.is_some_and(|c| c.stream == o.stream && c.seq == o.seq),
            ));
        }
    }
    ops.sort_by_key(|(o, _)| (o.time_ns, o.seq));
    ops
}
