//! The one-line note that cudablame appends to the error string of the reported sticky error
//! (`cuGetErrorString` / `cudaGetErrorString`), so that the culprit reaches the exception message
//! a framework builds from it (PyTorch: `CUDA error: <string>`) and a notebook cell.

use super::lead::program_frame;
use super::names::brief;
use crate::model::Report;

/// `[cudablame: culprit KERNEL, launched at FILE:LINE (CONFIDENCE); report PATH]`, one line:
/// the culprit's short kernel name (`brief`), the program's launching line (file name without
/// its directory), the confidence and the JSON report's path as written (absent with
/// `CUDABLAME_REPORT=off`). Without a culprit op: `[cudablame: culprit not identified
/// (CONFIDENCE); ...]`. Never longer than about 300 characters (names are cut).
pub fn error_string_note(r: &Report) -> String {
    let confidence = format!("{:?}", r.culprit.confidence).to_lowercase();
    let mut out = String::from("[cudablame: culprit ");
    match &r.culprit.op {
        Some(o) => {
            let name = match &o.kernel {
                Some(k) => brief(k),
                None => super::names::op_brief(o),
            };
            out.push_str(&super::fit(&name, 80));
            if let Some(f) = program_frame(&o.python, &o.stack, o.kernel.as_deref()) {
                let file = f.file.as_deref().unwrap_or("?");
                let base = file.rsplit('/').next().unwrap_or(file);
                out.push_str(&format!(
                    ", launched at {}:{}",
                    super::fit(base, 80),
                    f.line.unwrap_or(0)
                ));
            }
            out.push_str(&format!(" ({confidence})"));
        }
        None => out.push_str(&format!("not identified ({confidence})")),
    }
    match &r.path {
        Some(p) => out.push_str(&format!("; report {}]", super::fit(p, 120))),
        None => out.push(']'),
    }
    // One line: a name or path with a newline in it would break the message in two.
    out.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Frame, PythonFrames};

    fn frame(file: &str, line: u32) -> Frame {
        Frame {
            function: Some("main".into()),
            file: Some(file.into()),
            line: Some(line),
            module: None,
            address: "0x1".into(),
        }
    }

    #[test]
    fn names_kernel_line_confidence_and_path() {
        let mut r = crate::fixtures::sample();
        r.path = Some("cudablame-node3-4711.json".into());
        let op = r.culprit.op.as_mut().unwrap();
        op.python = PythonFrames {
            python_stack: vec![frame("/home/u/proj/train.py", 42)],
            ..Default::default()
        };
        assert_eq!(
            error_string_note(&r),
            "[cudablame: culprit k2, launched at train.py:42 (exact); report cudablame-node3-4711.json]"
        );
    }

    #[test]
    fn native_frame_without_python_and_no_report_file() {
        let mut r = crate::fixtures::sample();
        r.path = None;
        r.culprit.op.as_mut().unwrap().stack = vec![frame("/src/app.cu", 17)];
        assert_eq!(
            error_string_note(&r),
            "[cudablame: culprit k2, launched at app.cu:17 (exact)]"
        );
    }

    #[test]
    fn without_culprit_or_frame() {
        let mut r = crate::fixtures::sample();
        r.path = Some("r.json".into());
        assert_eq!(
            error_string_note(&r),
            "[cudablame: culprit k2 (exact); report r.json]"
        );
        r.culprit.op = None;
        r.culprit.confidence = crate::model::Confidence::Suspect;
        assert_eq!(
            error_string_note(&r),
            "[cudablame: culprit not identified (suspect); report r.json]"
        );
    }
}
