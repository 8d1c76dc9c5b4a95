//! The lexical side of the machines file: comments, `key=value` pairs,
//! quoting, `ssh_options` words, and the checks on names, numbers and paths.
//! Every function returns a message for the caller to put a line number on.

use super::MAX_SLOTS;

/// At most this many words in `ssh_options`.
const MAX_SSH_OPTIONS: usize = 64;
/// Longest `prefix=` path.
pub(super) const MAX_PATH_BYTES: usize = 1024;
/// Longest host name (RFC 1123 / RFC 1035).
pub(super) const MAX_HOST_NAME: usize = 253;
/// Longest site name.
pub(super) const MAX_SITE_NAME: usize = 64;
/// Longest user name (as Linux `useradd` allows).
pub(super) const MAX_USER_NAME: usize = 32;

/// `text` quoted for an error message: escaped (a hostile file cannot put
/// terminal control sequences on the user's screen) and cut to 80 characters.
pub(super) fn quote(text: &str) -> String {
    const MAX: usize = 80;
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut:?}…")
    }
}

/// `a.b.c.d` with each part a decimal 0–255 without leading zeros (a
/// leading zero means octal to `inet_aton`, so such names are refused).
pub(super) fn dotted_quad(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split('.');
    for slot in out.iter_mut() {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if p.len() > 1 && p.starts_with('0') {
            return None;
        }
        *slot = p.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(out)
}

/// Why `name` is not an acceptable host name, if it is not: an RFC 1123
/// name (labels of letters, digits and `-`, not starting or ending with `-`,
/// at most 63 bytes each, 253 in all) or an IPv4 dotted quad. An all-numeric
/// name must be a valid dotted quad. Names starting with `-` can thus never
/// reach ssh's command line as an option.
pub(super) fn host_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty host name");
    }
    if name.len() > MAX_HOST_NAME {
        return Some("host name longer than 253 bytes");
    }
    if name.starts_with('[') || name.contains(':') {
        return Some("IPv6 addresses are not accepted (use a host name)");
    }
    let numeric = name.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if numeric {
        return match dotted_quad(name) {
            Some(_) => None,
            None => Some("not a valid IPv4 address (four numbers 0-255, no leading zeros)"),
        };
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("empty label in host name (\"..\", or a leading or trailing dot)");
        }
        if label.len() > 63 {
            return Some("host name label longer than 63 bytes");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Some("host names may only hold letters, digits, '-' and '.'");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some("a host name label may not start or end with '-'");
        }
    }
    None
}

pub(super) fn site_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SITE_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A login name as `useradd` accepts it, without a leading `-` (which ssh
/// would read as an option).
pub(super) fn user_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_USER_NAME
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// An absolute path made of characters a remote shell leaves alone.
pub(super) fn prefix_ok(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= MAX_PATH_BYTES
        && path.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'_' | b'.' | b'/' | b'+' | b'-' | b'@' | b'%' | b'~' | b','
                )
        })
}

/// A decimal count 1..=MAX_SLOTS (digits only: no sign, no spaces).
pub(super) fn parse_count(s: &str) -> Result<usize, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{} is not a number", quote(s)));
    }
    // Digits only, so a parse error can only be an overflow.
    let n: usize = s
        .parse()
        .map_err(|_| format!("{} is more than {MAX_SLOTS}", quote(s)))?;
    if n == 0 {
        return Err("0 slots: a host needs at least 1 (leave it out instead)".into());
    }
    if n > MAX_SLOTS {
        return Err(format!("{n} is more than {MAX_SLOTS}"));
    }
    Ok(n)
}

/// `key=value` pairs after the first word of a line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Pair {
    pub(super) key: String,
    pub(super) value: String,
}

/// Cuts `line` at the first `#` outside double quotes.
pub(super) fn strip_comment(line: &str) -> &str {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if in_quotes {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quotes = false;
            }
        } else if c == '"' {
            in_quotes = true;
        } else if c == '#' {
            return line.get(..i).unwrap_or(line);
        }
    }
    line
}

/// Splits `key=value key="a value" key = value …` (whitespace around `=`
/// allowed, as Open MPI's lexer allows it). Inside double quotes, `\"` and
/// `\\` are escapes. Control characters are refused everywhere.
pub(super) fn parse_pairs(text: &str) -> Result<Vec<Pair>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut pairs = Vec::new();
    let skip_ws = |i: &mut usize| {
        while chars.get(*i).is_some_and(|c| c.is_whitespace()) {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= chars.len() {
            return Ok(pairs);
        }
        let start = i;
        while chars
            .get(i)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            i += 1;
        }
        let key: String = chars.get(start..i).unwrap_or_default().iter().collect();
        skip_ws(&mut i);
        if key.is_empty() || chars.get(i) != Some(&'=') {
            let word: String = chars
                .get(start..)
                .unwrap_or_default()
                .iter()
                .take_while(|c| !c.is_whitespace())
                .collect();
            return Err(format!("expected key=value, found {}", quote(&word)));
        }
        i += 1; // '='
        skip_ws(&mut i);
        let mut value = String::new();
        if chars.get(i) == Some(&'"') {
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(format!("unterminated \"…\" in the value of {key}")),
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some('\\') => match chars.get(i + 1) {
                        Some(&c @ ('"' | '\\')) => {
                            value.push(c);
                            i += 2;
                        }
                        _ => {
                            return Err(format!(
                                "in the value of {key}: only \\\" and \\\\ are escapes inside \"…\""
                            ))
                        }
                    },
                    Some(&c) => {
                        value.push(c);
                        i += 1;
                    }
                }
            }
            if chars.get(i).is_some_and(|c| !c.is_whitespace()) {
                return Err(format!("{key}=\"…\" must be followed by a space"));
            }
        } else {
            while let Some(&c) = chars.get(i) {
                if c.is_whitespace() {
                    break;
                }
                if c == '"' {
                    return Err(format!(
                        "a '\"' inside the value of {key}: quote the whole value"
                    ));
                }
                value.push(c);
                i += 1;
            }
        }
        if value.is_empty() {
            return Err(format!("empty value for {key}"));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!("control character in the value of {key}"));
        }
        pairs.push(Pair { key, value });
    }
}

/// Splits `ssh_options` into words (whitespace separates; single quotes
/// group, as in a shell) and checks that every word is an ssh option or the
/// argument of one.
pub(super) fn split_ssh_options(value: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut in_quotes = false;
    for c in value.chars() {
        if in_quotes {
            if c == '\'' {
                in_quotes = false;
            } else {
                word.push(c);
            }
        } else if c == '\'' {
            in_quotes = true;
            in_word = true;
        } else if c.is_whitespace() {
            if in_word {
                words.push(std::mem::take(&mut word));
                in_word = false;
            }
        } else {
            word.push(c);
            in_word = true;
        }
        if words.len() > MAX_SSH_OPTIONS {
            return Err(format!("ssh_options: more than {MAX_SSH_OPTIONS} words"));
        }
    }
    if in_quotes {
        return Err("ssh_options: unterminated '…'".into());
    }
    if in_word {
        words.push(word);
    }
    if words.len() > MAX_SSH_OPTIONS {
        return Err(format!("ssh_options: more than {MAX_SSH_OPTIONS} words"));
    }
    check_ssh_options(&words)?;
    Ok(words)
}

/// ssh's flags without an argument that leave the session as a proxy start
/// needs it: not `-f`, `-N`, `-G`, `-V`, `-s`, `-M`, which start no command
/// or run none, nor `-n` and `-t`: the proxy's stdin carries the job secret,
/// which `-n` would cut off and a `-t` terminal would mangle.
const SSH_FLAGS: &str = "46AaCgKkqTvXxY";
/// ssh's options that take an argument and leave the session usable (no
/// `-O`, `-Q`, `-W`, `-e`).
const SSH_WITH_ARG: &str = "bBcDEFiIJlLmopRSw";

/// Every word is `-FLAGS` (flags of [`SSH_FLAGS`], possibly ending with one
/// of [`SSH_WITH_ARG`] followed by its argument, attached or as the next
/// word). A word that is neither would become ssh's destination.
pub(super) fn check_ssh_options(words: &[String]) -> Result<(), String> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let Some(letters) = w.strip_prefix('-').filter(|l| !l.is_empty()) else {
            return Err(format!(
                "ssh_options: {} is not an ssh option (ssh would take it for the host)",
                quote(w)
            ));
        };
        let mut needs_arg = false;
        for (k, c) in letters.char_indices() {
            if SSH_FLAGS.contains(c) {
                continue;
            }
            if SSH_WITH_ARG.contains(c) {
                // The rest of the word, if any, is the argument.
                needs_arg = letters.get(k + c.len_utf8()..).unwrap_or("").is_empty();
                break;
            }
            return Err(format!(
                "ssh_options: option -{c} of {} is not accepted (allowed: -{SSH_FLAGS} and, with an argument, -{SSH_WITH_ARG})",
                quote(w)
            ));
        }
        if needs_arg {
            if words.get(i + 1).is_none() {
                return Err(format!("ssh_options: {} needs an argument", quote(w)));
            }
            i += 1;
        }
        i += 1;
    }
    Ok(())
}
