//! Text as words of a shell command: what ember writes into scripts (the Slurm array) and into
//! the commands it suggests.

/// `s` as one single-quoted shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` as one shell word: as it is where it is plain, else [`quote`]d (or, holding a control
/// character such as a newline, as a `$'...'` word, so that it stays on one line).
pub fn word(s: &str) -> String {
    // Characters no shell reads specially (`=` and `:` only inside a word that does not
    // start a command, as in the commands ember suggests: zsh expands a leading `=`).
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:,+@%=".contains(c);
    match s.chars().all(plain) && !s.is_empty() && !s.starts_with('=') {
        true => s.to_string(),
        false if s.chars().any(char::is_control) => ansi_c(s),
        false => quote(s),
    }
}

/// `s` as a `$'...'` word (bash, zsh, ksh), its backslashes, quotes and control characters
/// escaped: nothing in it is expanded, and it stays on one line.
fn ansi_c(s: &str) -> String {
    let mut out = String::from("$'");
    for c in s.chars() {
        match c {
            '\\' | '\'' => out.extend(['\\', c]),
            c if c.is_control() && c.is_ascii() => out += &format!("\\x{:02x}", u32::from(c)),
            c if c.is_control() => out += &format!("\\u{:04x}", u32::from(c)),
            c => out.push(c),
        }
    }
    out + "'"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_survive_the_shell() {
        assert_eq!(quote("model.hidden=[8]"), "'model.hidden=[8]'");
        assert_eq!(quote("data.label='y'"), r"'data.label='\''y'\'''");
        assert_eq!(word("user_id"), "user_id");
        assert_eq!(word("Zip Code"), "'Zip Code'");
        assert_eq!(word("data/train-2024.csv"), "data/train-2024.csv");
        assert_eq!(word("it's"), r"'it'\''s'");
        assert_eq!(word(""), "''");
        assert_eq!(word("=x"), "'=x'");
        assert_eq!(word("a\t$(x)'"), r"$'a\x09$(x)\''");
    }
}
