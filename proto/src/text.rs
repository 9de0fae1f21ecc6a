//! Text cut to a byte budget without splitting a character (previews, summaries, messages),
//! and multi-line text carried on one line (the daemon's ready report) or told in one (an
//! agent's error message).

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Whether `byte` may stand in a session key (base64url).
fn is_key_char(byte: &u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_')
}

/// `kept`, the start of a longer text, less the last 42 key characters of the word a cut
/// fell in: they may be most of a session key (43 characters), which no redaction recognises
/// once cut, since only whole keys' hashes are known.
pub fn without_key_start(kept: &str) -> &str {
    let run = kept.bytes().rev().take_while(is_key_char).take(42).count();
    &kept[..kept.len() - run]
}

/// [`cut`], never ending inside a word of key characters (see [`without_key_start`]): for
/// a caller's text a person is shown cut.
pub fn cut_clear(text: &str, max: usize) -> &str {
    let kept = cut(text, max);
    match text.as_bytes().get(kept.len()).is_some_and(is_key_char) {
        true => without_key_start(kept),
        false => kept,
    }
}

/// `text` on one line, reversibly: `\\` for a backslash, `\n` for a line break.
pub fn to_one_line(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The text [`to_one_line`] carried.
pub fn from_one_line(line: &str) -> String {
    let mut text = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some('n')) => {
                text.push('\n');
                chars.next();
            }
            ('\\', Some('\\')) => {
                text.push('\\');
                chars.next();
            }
            _ => text.push(c),
        }
    }
    text
}

/// A multi-line message told in one line, for a reader that takes one (an agent): its first
/// line, and its last when that is another (a TOML error's first line says where, its last
/// what).
pub fn first_and_last_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    match lines.next_back() {
        Some(last) => format!("{first} ({last})"),
        None => first.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_cut_leaves_no_start_of_a_key() {
        let key = "k".repeat(43);
        assert_eq!(cut_clear(&format!("ab {key}"), 10), "ab ");
        assert_eq!(cut_clear(&format!("ab {key}"), 46), format!("ab {key}"));
        assert_eq!(cut_clear(&format!("ab {key} cd"), 46), format!("ab {key}"));
        assert_eq!(cut_clear("a b c d", 3), "a b");
        // A word longer than a key keeps what a key could not be part of.
        let long = "w".repeat(100);
        assert_eq!(cut_clear(&long, 60), "w".repeat(18));
    }

    #[test]
    fn lines_go_on_one_line_and_come_back() {
        for text in ["a\nb", "back\\slash\\n", "", "\n\n", "x\\"] {
            let line = to_one_line(text);
            assert!(!line.contains('\n'), "{line:?}");
            assert_eq!(from_one_line(&line), text, "{line:?}");
        }
    }

    #[test]
    fn a_message_in_one_line_keeps_where_and_what() {
        let toml =
            "c.toml: TOML parse error at line 1\n  |\n1 | x = \"y\"\n  |     ^\ninvalid type";
        assert_eq!(
            first_and_last_line(toml),
            "c.toml: TOML parse error at line 1 (invalid type)"
        );
        assert_eq!(first_and_last_line("one line"), "one line");
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("hi", 10), "hi");
        assert_eq!(cut("", 0), "");
    }
}
