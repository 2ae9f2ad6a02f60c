//! Small helpers the harness shares: a directory in memory for what must
//! not wait on the disk, the end of a long text, and the heading a server's
//! log follows in a failing test's message.

/// The heading before the server's log in a wait's panic message; what
/// follows it is not said again at the end of a failing test's output.
pub const SERVER_LOG: &str = "\nserver log:";

/// A new directory in memory (`/dev/shm`), else in the temporary
/// directory: a sync there costs nothing, however busy the disk is.
pub fn in_memory_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let made = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
    made.expect("a temporary directory")
}

/// The last `bytes` bytes of `text` at most, starting on a character.
pub fn tail(text: &str, bytes: usize) -> &str {
    let mut from = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    &text[from..]
}

#[cfg(test)]
mod tests {
    use super::tail;

    #[test]
    fn a_tail_starts_on_a_character() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("ab", 10), "ab");
        // "é" is two bytes: a cut inside it moves forward.
        assert_eq!(tail("aéb", 2), "b");
        assert_eq!(tail("aéb", 3), "éb");
    }
}
