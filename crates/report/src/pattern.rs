//! Report and trace path patterns (`CUDABLAME_REPORT`, `CUDABLAME_TRACE`, `cudablame run
//! --report`): `%p` the pid, `%h` the host name, `%r` the rank, `%%` a `%`. Shared by the library
//! and the command (by path, see `src/main.rs`): std only.

/// One step of reading a pattern.
enum Piece {
    Char(char),
    /// `%` followed by this character.
    Escape(char),
    /// A `%` at the very end.
    Lone,
}

fn pieces(pattern: &str) -> impl Iterator<Item = Piece> + '_ {
    let mut chars = pattern.chars();
    std::iter::from_fn(move || {
        let c = chars.next()?;
        Some(if c != '%' {
            Piece::Char(c)
        } else {
            chars.next().map_or(Piece::Lone, Piece::Escape)
        })
    })
}

/// Expands the escapes of `pattern` for a process; unknown escapes and a lone `%` stay as
/// written (they are warned about once, see [`escape_problem`]).
pub fn expand(pattern: &str, pid: u32, host: &str, rank: u32) -> String {
    let mut out = String::new();
    for piece in pieces(pattern) {
        match piece {
            Piece::Char(c) => out.push(c),
            Piece::Escape('p') => out.push_str(&pid.to_string()),
            Piece::Escape('h') => out.push_str(host),
            Piece::Escape('r') => out.push_str(&rank.to_string()),
            Piece::Escape('%') => out.push('%'),
            Piece::Escape(other) => {
                out.push('%');
                out.push(other);
            }
            Piece::Lone => out.push('%'),
        }
    }
    out
}

/// What is wrong with the escapes of `pattern`, in words for a warning; `None` when nothing is.
pub fn escape_problem(pattern: &str) -> Option<String> {
    pieces(pattern).find_map(|piece| match piece {
        Piece::Escape('p' | 'h' | 'r' | '%') | Piece::Char(_) => None,
        Piece::Escape(o) => Some(format!(
            "unknown escape %{o} (known: %p pid, %h host, %r rank, %% a %)"
        )),
        Piece::Lone => Some("ends in a lone % (write %% for a %)".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_known_escapes_and_keeps_the_rest() {
        assert_eq!(
            expand("r-%h-%p-%r-%%.json", 7, "node1", 3),
            "r-node1-7-3-%.json"
        );
        assert_eq!(expand("a-%q-%", 7, "h", 0), "a-%q-%");
        assert_eq!(escape_problem("r-%h-%p-%r-%%.json"), None);
        assert!(escape_problem("a-%q").unwrap().contains("%q"));
        assert!(escape_problem("a-%").unwrap().contains("lone"));
    }
}
