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
