//! Report time (cold): captured frames to file, function and line, with CPython's line-table algorithms.

use super::backward::*;
use super::capture::*;
use super::intern::*;
use super::layout::*;
use cudablame_report::model::{Frame, PythonFrames};

/// `PyCode_Addr2Line`: the line of the instruction at byte offset `offset` (`-1`: not started,
/// the first line), `None` for instructions without a line.
pub(crate) fn addr2line(
    format: LineTable,
    table: &[u8],
    firstlineno: i32,
    offset: i32,
) -> Option<i32> {
    if offset < 0 {
        return Some(firstlineno);
    }
    let line = match format {
        LineTable::Pep626 => pep626_line(table, firstlineno, offset),
        LineTable::Locations => locations_line(table, firstlineno, offset),
    };
    (line >= 0).then_some(line)
}

/// 3.10, `Objects/lnotab_notes.txt`: pairs (bytecode delta, line delta as a signed byte);
/// -128 marks a range without a line.
pub(super) fn pep626_line(table: &[u8], firstlineno: i32, offset: i32) -> i32 {
    let (mut end, mut line) = (0i32, firstlineno);
    for pair in table.chunks_exact(2) {
        end += pair[0] as i32;
        let delta = pair[1] as i8;
        let here = if delta == -128 {
            -1
        } else {
            line += delta as i32;
            line
        };
        if offset < end {
            return here;
        }
    }
    -1
}

/// 3.11+, `Objects/locations.md`: entries of one header byte `1cccclll` (code, length - 1 in
/// code units) and their data; code 15 = no location, 14 long form and 13 no-column form start
/// with a signed varint line delta, 10..12 = line delta 0..2, 0..9 = same line.
pub(super) fn locations_line(table: &[u8], firstlineno: i32, offset: i32) -> i32 {
    let (mut i, mut end, mut line) = (0usize, 0i32, firstlineno);
    while i < table.len() {
        let head = table[i];
        let code = (head >> 3) & 15;
        let delta = match code {
            13 | 14 => signed_varint(&table[i + 1..]),
            10..=12 => code as i32 - 10,
            _ => 0,
        };
        line += delta;
        end += ((head & 7) as i32 + 1) * 2;
        if offset < end {
            return if code == 15 { -1 } else { line };
        }
        i += 1;
        while i < table.len() && table[i] & 0x80 == 0 {
            i += 1;
        }
    }
    -1
}

pub(super) fn signed_varint(b: &[u8]) -> i32 {
    let (mut val, mut shift) = (0u32, 0u32);
    for &byte in b {
        val |= ((byte & 63) as u32).wrapping_shl(shift);
        shift += 6;
        if byte & 64 == 0 {
            break;
        }
    }
    if val & 1 != 0 {
        -((val >> 1) as i32)
    } else {
        (val >> 1) as i32
    }
}

impl PythonStack {
    /// Report time: the frames as file, function and line, innermost first, with the borrowed
    /// backward context appended.
    pub(crate) fn resolve(&self) -> PythonFrames {
        let mut frames: Vec<Frame> = self.frames().iter().map(|f| resolve_frame(*f)).collect();
        if self.lost_frames() > 0 {
            frames.push(Frame {
                function: Some(format!(
                    "<{} more frames lost: python stack table full>",
                    self.lost_frames()
                )),
                file: None,
                line: None,
                module: None,
                address: String::new(),
            });
        }
        if self.truncated {
            frames.push(Frame {
                function: Some("<more frames: CUDABLAME_PYTHON_DEPTH>".into()),
                file: None,
                line: None,
                module: None,
                address: String::new(),
            });
        }
        let mut r = PythonFrames {
            python_stack: frames,
            python_stack_from_thread: None,
            python_stack_borrowed_from: None,
        };
        let history = match self.borrowed {
            0 => None,
            _ => BACKWARD.try_lock_for(LOCK_WAIT),
        };
        if let Some(history) = history {
            if let Some(ctx) = history.iter().find(|c| c.gen == self.borrowed) {
                r.python_stack_borrowed_from = Some(r.python_stack.len());
                r.python_stack_from_thread = Some(ctx.thread);
                r.python_stack
                    .extend(ctx.stack.frames().iter().map(|f| resolve_frame(*f)));
            }
        }
        r
    }
}

pub(super) fn resolve_frame(f: FrameRef) -> Frame {
    let Some(e) = entry(f.entry) else {
        return Frame {
            function: Some("<unknown>".into()),
            file: None,
            line: None,
            module: None,
            address: format!("{:#x}", f.offset.max(0)),
        };
    };
    Frame {
        function: Some(e.function.to_string()),
        file: Some(e.filename.to_string()),
        line: addr2line(e.lines, &e.linetable, e.firstlineno, f.offset)
            .and_then(|l| u32::try_from(l).ok()),
        module: None,
        // The bytecode offset of the instruction in its code object.
        address: format!("{:#x}", f.offset.max(0)),
    }
}
