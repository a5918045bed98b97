//! Module images, modules, libraries and functions/kernels.
//!
//! See the crate documentation for the text image format. Parsing is strict about `// fake:`
//! lines (an unknown key or a bad number makes the load fail with `CUDA_ERROR_INVALID_IMAGE` and a
//! message on stderr), because those lines are written by test authors and a silent typo would
//! make a test pass for the wrong reason.

use crate::context::Context;
use crate::errors;
use crate::handles::Registry;
use crate::types::{CUresult, Res};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::atomic::AtomicU64;

/// Live `CUfunction` and `CUkernel` handles (one registry: a kernel is usable as a function).
pub static FUNCS: Registry<Func> = Registry::new();
/// Live `CUmodule` handles.
pub static MODULES: Registry<Module> = Registry::new();
/// Live `CUlibrary` handles.
pub static LIBRARIES: Registry<Module> = Registry::new();

/// Behaviour of one kernel, from its `// fake:` lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelSpec {
    /// Execution time on the stream worker, in microseconds.
    pub delay_us: u64,
    /// Sticky error raised when the kernel executes.
    pub fault: Option<CUresult>,
    /// Only this (1-based) execution faults.
    pub fault_on: Option<u64>,
    /// Error returned synchronously by every launch (nothing is enqueued).
    pub launch_error: Option<CUresult>,
    /// When the kernel faults: print a device-side assert of this condition (see the crate doc).
    pub assert: Option<String>,
    /// Runs inside the launch call when its stream is idle (see the crate doc, `inline=1`).
    pub inline: bool,
}

/// A parsed image.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// Kernels in declaration order.
    pub kernels: Vec<(String, KernelSpec)>,
    /// `// fake: module_error=CODE`: loading the image fails with CODE.
    pub module_error: Option<CUresult>,
}

impl Image {
    fn kernel(&mut self, name: &str) -> &mut KernelSpec {
        let index = match self.kernels.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.kernels.push((name.to_owned(), KernelSpec::default()));
                self.kernels.len() - 1
            }
        };
        &mut self.kernels[index].1
    }
}

fn parse_number(key: &str, value: &str) -> Result<u64, String> {
    let parsed = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse::<u64>(),
    };
    parsed.map_err(|_| format!("`{key}={value}`: not a number"))
}

fn parse_code(key: &str, value: &str) -> Result<CUresult, String> {
    match CUresult::try_from(parse_number(key, value)?) {
        Ok(0) => Err(format!("`{key}=0`: 0 is CUDA_SUCCESS, not an error")),
        Ok(code) => Ok(code),
        Err(_) => Err(format!("`{key}={value}`: out of range")),
    }
}

/// The kernel name declared by an `.entry` directive on `line`, if any.
fn entry_name(line: &str) -> Option<&str> {
    let mut rest = line;
    while let Some(pos) = rest.find(".entry") {
        let before_ok = rest[..pos]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let after = &rest[pos + ".entry".len()..];
        if before_ok && after.starts_with(char::is_whitespace) {
            let after = after.trim_start();
            let end = after
                .find(|c: char| c == '(' || c.is_whitespace())
                .unwrap_or(after.len());
            if end > 0 {
                return Some(&after[..end]);
            }
        }
        rest = after;
    }
    None
}

/// Parses a text image. `Err` carries a human-readable message.
pub fn parse(text: &str) -> Result<Image, String> {
    let mut image = Image::default();
    for (lineno, line) in text.lines().enumerate() {
        let directive = line
            .trim_start()
            .strip_prefix("//")
            .and_then(|l| l.trim_start().strip_prefix("fake:"));
        let Some(directive) = directive else {
            if let Some(name) = entry_name(line) {
                image.kernel(name);
            }
            continue;
        };
        let context = |e: String| format!("line {}: {e}", lineno + 1);
        let mut tokens = directive.split_whitespace().peekable();
        let kernel = match tokens.peek() {
            Some(t) if !t.contains('=') => tokens.next(),
            _ => None,
        };
        for token in tokens {
            let (key, value) = token
                .split_once('=')
                .ok_or_else(|| context(format!("`{token}`: expected key=value")))?;
            match (kernel, key) {
                (None, "module_error") => {
                    image.module_error = Some(parse_code(key, value).map_err(context)?)
                }
                (None, _) => {
                    return Err(context(format!(
                        "`{key}`: unknown module key (a kernel line is `// fake: NAME key=value`)"
                    )))
                }
                (Some(name), "delay_us") => {
                    image.kernel(name).delay_us = parse_number(key, value).map_err(context)?
                }
                (Some(name), "fault") => {
                    image.kernel(name).fault = Some(parse_code(key, value).map_err(context)?)
                }
                (Some(name), "fault_on") => {
                    let k = parse_number(key, value).map_err(context)?;
                    if k == 0 {
                        return Err(context("`fault_on=0`: executions count from 1".into()));
                    }
                    image.kernel(name).fault_on = Some(k)
                }
                (Some(name), "assert") => image.kernel(name).assert = Some(value.to_string()),
                (Some(name), "inline") => {
                    image.kernel(name).inline = parse_number(key, value).map_err(context)? != 0
                }
                (Some(name), "launch_error") => {
                    image.kernel(name).launch_error = Some(parse_code(key, value).map_err(context)?)
                }
                (Some(_), _) => {
                    return Err(context(format!(
                    "`{key}`: unknown kernel key (delay_us, fault, fault_on, launch_error, assert, inline)"
                )))
                }
            }
        }
        if let Some(name) = kernel {
            // A directive alone declares the kernel too.
            image.kernel(name);
        }
    }
    for (name, spec) in &image.kernels {
        if spec.fault_on.is_some() && spec.fault.is_none() {
            return Err(format!("kernel {name}: fault_on= needs fault="));
        }
    }
    Ok(image)
}

/// A kernel: name, behaviour and execution counter.
pub struct Func {
    /// NUL-terminated name, stable for the life of the process.
    pub name: CString,
    /// Behaviour from the image.
    pub spec: KernelSpec,
    /// Number of executions so far (used by `fault_on`).
    pub executions: AtomicU64,
}

/// A loaded module or library: its kernels by name.
pub struct Module {
    /// Context the module was loaded in (`None` for context-independent libraries).
    pub ctx: Option<&'static Context>,
    funcs: BTreeMap<String, &'static Func>,
}

impl Module {
    /// Parses `text` and creates a module with one registered function per kernel.
    pub fn load(text: &str, ctx: Option<&'static Context>) -> Res<Module> {
        let image = parse(text).map_err(|msg| {
            crate::diag(format_args!("invalid module image: {msg}"));
            errors::INVALID_IMAGE
        })?;
        if let Some(code) = image.module_error {
            return Err(code);
        }
        let mut funcs = BTreeMap::new();
        for (name, spec) in image.kernels {
            let Ok(cname) = CString::new(name.clone()) else {
                continue;
            };
            let func = FUNCS.insert(Func {
                name: cname,
                spec,
                executions: AtomicU64::new(0),
            });
            crate::trace!("kernel {} = {:p} ({:?})", name, func, func.spec);
            funcs.insert(name, func);
        }
        Ok(Module { ctx, funcs })
    }

    /// The function named `name` (`CUDA_ERROR_NOT_FOUND` if the image did not declare it).
    pub fn function(&self, name: &str) -> Res<&'static Func> {
        self.funcs.get(name).copied().ok_or(errors::NOT_FOUND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_directives() {
        let text = "\
.version 8.0
.visible .entry oob_write(
    .param .u64 p
)
.entry  _Z4slowv ( )
// fake: oob_write fault=700 fault_on=2 delay_us=0x10
//fake: _Z4slowv delay_us=200000
// fake: bad launch_error=701
// fake: tiny inline=1
";
        let image = parse(text).unwrap();
        let names: Vec<_> = image.kernels.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["oob_write", "_Z4slowv", "bad", "tiny"]);
        assert_eq!(
            image.kernels[0].1,
            KernelSpec {
                delay_us: 16,
                fault: Some(700),
                fault_on: Some(2),
                launch_error: None,
                assert: None,
                inline: false,
            }
        );
        assert_eq!(image.kernels[1].1.delay_us, 200000);
        assert_eq!(image.kernels[2].1.launch_error, Some(701));
        assert!(image.kernels[3].1.inline && !image.kernels[0].1.inline);
        assert_eq!(image.module_error, None);
    }

    #[test]
    fn module_error_and_mistakes() {
        assert_eq!(
            parse("// fake: module_error=218").unwrap().module_error,
            Some(218)
        );
        assert!(parse("// fake: k dealy_us=5").is_err());
        assert!(parse("// fake: k fault=abc").is_err());
        assert!(parse("// fake: k fault_on=1").is_err());
        assert!(parse("// fake: k fault=0").is_err());
        assert!(parse("// fake: colour=blue").is_err());
    }

    #[test]
    fn entry_needs_token_boundaries() {
        assert_eq!(entry_name(".entry k("), Some("k"));
        assert_eq!(entry_name("  .visible .entry k2 (x)"), Some("k2"));
        assert_eq!(entry_name(".entryk("), None);
        assert_eq!(entry_name("x.entry k("), None);
        assert_eq!(entry_name(".entry ("), None);
    }
}
