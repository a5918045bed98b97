//! `cudablame jupyter install|uninstall`: a Jupyter kernel that runs under cudablame.
//!
//! A notebook's kernel is a process Jupyter starts from a kernelspec (`kernel.json`: `argv`,
//! `env`; jupyter_client docs, "Kernel specs"); it cannot be preloaded once running. `install`
//! writes a kernelspec that starts the environment's Python as `ipykernel_launcher` with
//! `LD_PRELOAD` of the located `libcudablame.so` (`locate`) and `CUDABLAME_REPORT` set. The
//! culprit then shows in the failing cell through the error string (the exception PyTorch raises
//! carries `[cudablame: culprit ...]`), while the text report goes to the server's console.

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const ABOUT: &str = "Install (or remove) a Jupyter kernel that runs Python under cudablame";

pub const EXAMPLES: &str = "\
Examples:
  cudablame jupyter install                         kernel \"cudablame\" for python3 on PATH, per user
  cudablame jupyter install --python .venv/bin/python --name torch-cb --display-name 'Torch (cudablame)'
  cudablame jupyter install --prefix \"$VIRTUAL_ENV\"  into an environment (jupyter in it finds it)
  cudablame jupyter uninstall --name torch-cb";

#[derive(clap::Args)]
pub struct JupyterArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Write the kernelspec (kernel.json) of a Python kernel with libcudablame.so preloaded
    Install(InstallArgs),
    /// Remove a kernelspec written by `cudablame jupyter install`
    Uninstall(Where),
}

#[derive(clap::Args)]
struct Where {
    /// Kernel name (the kernelspec's directory name)
    #[arg(long, default_value = "cudablame")]
    name: String,
    /// Per-user kernelspec: $JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else
    /// ~/.local/share/jupyter (the default)
    #[arg(long, conflicts_with = "prefix")]
    user: bool,
    /// Into PREFIX/share/jupyter/kernels/ (an environment's prefix, e.g. $VIRTUAL_ENV)
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<PathBuf>,
}

#[derive(clap::Args)]
struct InstallArgs {
    #[command(flatten)]
    at: Where,
    /// The Python whose environment the kernel runs (its sys.executable is written)
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    python: String,
    /// Name shown in Jupyter's kernel list (default: "Python 3 (cudablame)")
    #[arg(long, value_name = "TEXT")]
    display_name: Option<String>,
    /// JSON report path pattern (%p pid, %h host, %r rank) [CUDABLAME_REPORT]; default
    /// $XDG_STATE_HOME/cudablame/reports/cudablame-%h-%p.json (~/.local/state/...)
    #[arg(long, value_name = "PATH")]
    report: Option<String>,
    /// Path of libcudablame.so (default: found as for `run`)
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
}

/// The marker in `kernel.json`'s `metadata` that says cudablame wrote it (uninstall checks it).
const MARKER: &str = "cudablame";

pub fn jupyter(args: JupyterArgs) -> ExitCode {
    let result = match args.action {
        Action::Install(a) => install(a),
        Action::Uninstall(w) => uninstall(w),
    };
    match result {
        Ok(message) => {
            println!("{message}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cudablame jupyter: {e}");
            ExitCode::FAILURE
        }
    }
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
}

fn home() -> Result<PathBuf, String> {
    env_dir("HOME").ok_or_else(|| "HOME is not set (give --prefix)".to_string())
}

/// The `kernels` directory the kernelspec goes into (as Jupyter looks for them: `jupyter
/// --paths`).
fn kernels_dir(at: &Where) -> Result<PathBuf, String> {
    let data = match &at.prefix {
        Some(p) => p.join("share/jupyter"),
        None => match env_dir("JUPYTER_DATA_DIR") {
            Some(d) => d,
            None => match env_dir("XDG_DATA_HOME") {
                Some(d) => d.join("jupyter"),
                None => home()?.join(".local/share/jupyter"),
            },
        },
    };
    Ok(data.join("kernels"))
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "kernel name {name:?}: use letters, digits, '-', '_' and '.' (as Jupyter does)"
        ))
    }
}

/// `sys.executable` of `python`, and whether it can import ipykernel.
fn python_executable(python: &str) -> Result<(String, bool), String> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sys, importlib.util as u; print(sys.executable); \
             print(u.find_spec('ipykernel') is not None)",
        ])
        .output()
        .map_err(|e| format!("cannot run {python}: {e} (give --python PATH)"))?;
    if !out.status.success() {
        return Err(format!(
            "{python} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let exe = lines.next().unwrap_or("").trim().to_string();
    if !Path::new(&exe).is_absolute() {
        return Err(format!(
            "{python} did not say where it lives (sys.executable {exe:?})"
        ));
    }
    Ok((exe, lines.next().map(str::trim) == Some("True")))
}

/// The kernelspec's `kernel.json`. `preload` is the `LD_PRELOAD` the kernel gets: the library
/// first, what the user had at install time kept after it (as `run` does). Jupyter sets a
/// kernelspec's `env` over its own environment, so the user's value must be written here or it
/// is lost.
fn kernel_json(python: &str, display: &str, preload: &str, report: &str) -> serde_json::Value {
    json!({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display,
        "language": "python",
        "env": {
            "LD_PRELOAD": preload,
            "CUDABLAME_REPORT": report,
        },
        "metadata": { "debugger": true, MARKER: { "version": env!("CARGO_PKG_VERSION") } },
    })
}

fn install(a: InstallArgs) -> Result<String, String> {
    check_name(&a.at.name)?;
    let lib = crate::locate::library(a.lib.as_deref())?;
    let lib = lib.canonicalize().unwrap_or(lib);
    let (python, has_ipykernel) = python_executable(&a.python)?;
    let report = match a.report {
        Some(r) => r,
        None => {
            let state = match env_dir("XDG_STATE_HOME") {
                Some(d) => d,
                None => home()?.join(".local/state"),
            };
            let dir = state.join("cudablame/reports");
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            dir.join("cudablame-%h-%p.json").display().to_string()
        }
    };
    if let Some(dir) = crate::common::pattern_dir(&report) {
        let _ = std::fs::create_dir_all(dir);
    }
    let display = a
        .display_name
        .unwrap_or_else(|| "Python 3 (cudablame)".to_string());
    let dir = kernels_dir(&a.at)?.join(&a.at.name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let existing = std::env::var("LD_PRELOAD").ok();
    let preload = crate::common::preload_value(&lib, existing.as_deref());
    let spec = kernel_json(&python, &display, &preload, &report);
    let text = serde_json::to_string_pretty(&spec).map_err(|e| e.to_string())? + "\n";
    let file = dir.join("kernel.json");
    std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let mut message = format!(
        "installed kernel {:?} (\"{display}\") in {}\n  python:  {python}\n  preload: {preload}\n  \
         reports: {report}\nA sticky CUDA error in a cell now names its culprit in the cell's \
         error message; the full report goes to the reports path.",
        a.at.name,
        dir.display(),
    );
    if !has_ipykernel {
        message.push_str(&format!(
            "\nnote: {python} cannot import ipykernel yet: `{python} -m pip install ipykernel`"
        ));
    }
    Ok(message)
}

fn uninstall(w: Where) -> Result<String, String> {
    check_name(&w.name)?;
    let dir = kernels_dir(&w)?.join(&w.name);
    let file = dir.join("kernel.json");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("no kernelspec at {}: {e}", file.display()))?;
    let spec: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if spec["metadata"].get(MARKER).is_none() {
        return Err(format!(
            "{} was not written by `cudablame jupyter install`: left alone",
            file.display()
        ));
    }
    std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
    Ok(format!(
        "removed kernel {:?} from {}",
        w.name,
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_json_runs_ipykernel_with_the_library_preloaded() {
        let spec = kernel_json(
            "/env/bin/python3",
            "Python 3 (cudablame)",
            "/opt/lib/libcudablame.so",
            "/r/cudablame-%h-%p.json",
        );
        assert_eq!(
            spec["argv"],
            json!([
                "/env/bin/python3",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}"
            ])
        );
        assert_eq!(spec["env"]["LD_PRELOAD"], "/opt/lib/libcudablame.so");
        assert_eq!(spec["env"]["CUDABLAME_REPORT"], "/r/cudablame-%h-%p.json");
        assert_eq!(spec["language"], "python");
        assert!(spec["metadata"][MARKER].is_object());
    }

    #[test]
    fn kernel_names_are_checked() {
        assert!(check_name("cudablame").is_ok());
        assert!(check_name("torch-cb_2.1").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
