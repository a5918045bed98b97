//! Writing the JSON report: path pattern expansion and a crash-safe, no-clobber write.

use super::model::Report;

/// Expands `%p` (pid), `%h` (host), `%r` (rank) and `%%` in a report path pattern.
pub fn expand(pattern: &str, pid: u32, host: &str, rank: u32) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('p') => out.push_str(&pid.to_string()),
            Some('h') => out.push_str(host),
            Some('r') => out.push_str(&rank.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Writes the report to the expanded pattern and returns the path written. The file is created
/// exclusively in the target directory (a temporary name), flushed to disk, then linked to its
/// final name without replacing anything there: a planted symlink or another process's file is
/// never followed or overwritten (the report then goes to `NAME.1.json`, `NAME.2.json`, ...).
/// Failures print one line on stderr and return `None`.
pub fn write_json(pattern: &str, report: &Report, rank: u32) -> Option<String> {
    let path = expand(pattern, report.process.pid, &report.process.host, rank);
    match try_write(&path, report) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("cudablame: cannot write the JSON report to {path}: {e} (set CUDABLAME_REPORT)");
            None
        }
    }
}

fn try_write(path: &str, report: &Report) -> std::io::Result<String> {
    use std::io::Write;
    let target = std::path::Path::new(path);
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let mut tmp = tempfile::Builder::new().prefix(".cudablame-").suffix(".json.tmp").tempfile_in(&dir)?;
    serde_json::to_writer_pretty(tmp.as_file_mut(), report)?;
    tmp.as_file_mut().write_all(b"\n")?;
    tmp.as_file().sync_all()?;
    let stem = target.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = target.extension().map(|s| format!(".{}", s.to_string_lossy())).unwrap_or_default();
    let mut candidate = target.to_path_buf();
    for n in 1..=100 {
        match tmp.persist_noclobber(&candidate) {
            Ok(_) => return Ok(candidate.display().to_string()),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                tmp = e.file;
                candidate = dir.join(format!("{stem}.{n}{ext}"));
            }
            Err(e) => return Err(e.error),
        }
    }
    Err(std::io::Error::other("100 report files with this name exist already"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_every_placeholder() {
        assert_eq!(expand("r-%h-%p-%r-%%-%x.json", 42, "node7", 3), "r-node7-42-3-%-%x.json");
        assert_eq!(expand("trailing%", 1, "h", 0), "trailing%");
    }
}
