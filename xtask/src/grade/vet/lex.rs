//! The lexer of [`super`]: a Rust file's tokens, as rustc reads them, comments and
//! whitespace left out. Only as exact as a check needs: where rustc and it could
//! disagree on what is code, the file is an error, never a guess.

/// What a token is; comments and whitespace are not tokens.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Kind {
    Ident,
    /// `r#name`: an identifier, never the keyword it spells.
    RawIdent,
    Lifetime,
    /// A string, byte string, raw string, character or number, with its prefix and suffix.
    Literal,
    /// One character of punctuation (`::` is two): copies compare alike either way.
    Punct,
}

#[derive(Debug)]
pub(super) struct Token<'a> {
    pub(super) kind: Kind,
    pub(super) text: &'a str,
    pub(super) line: usize,
}

impl Token<'_> {
    /// An identifier's name: `include_str` for `r#include_str`, which names the same macro.
    pub(super) fn name(&self) -> &str {
        if self.kind == Kind::RawIdent {
            &self.text[2..]
        } else {
            self.text
        }
    }
}

fn ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

struct Lexer<'a> {
    src: &'a str,
    at: usize,
    line: usize,
}

impl<'a> Lexer<'a> {
    fn rest(&self) -> &'a str {
        &self.src[self.at..]
    }

    fn peek(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.at += c.len_utf8();
        self.line += usize::from(c == '\n');
        Some(c)
    }

    fn eat_while(&mut self, f: impl Fn(char) -> bool) {
        while self.peek(0).is_some_and(&f) {
            self.bump();
        }
    }

    /// `/* … */`, nested as rustc nests them.
    fn block_comment(&mut self, line: usize) -> Result<(), String> {
        let mut depth = 0;
        loop {
            if self.rest().starts_with("/*") {
                depth += 1;
                self.at += 2;
            } else if self.rest().starts_with("*/") {
                self.at += 2;
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            } else if self.bump().is_none() {
                return Err(unterminated(line, "block comment"));
            }
        }
    }

    /// The rest of a string, past its opening `"`.
    fn string(&mut self, line: usize) -> Result<(), String> {
        loop {
            match self.bump() {
                Some('"') => return Ok(()),
                Some('\\') => {
                    self.bump();
                }
                Some(_) => {}
                None => return Err(unterminated(line, "string")),
            }
        }
    }

    /// A character literal, from its opening `'`.
    fn character(&mut self, line: usize) -> Result<(), String> {
        self.bump();
        match self.bump() {
            Some('\\') => {
                self.bump();
                self.eat_while(|c| c != '\'' && c != '\n');
            }
            Some('\n') | None => return Err(unterminated(line, "character")),
            Some(_) => {}
        }
        if self.bump() == Some('\'') {
            Ok(())
        } else {
            Err(unterminated(line, "character"))
        }
    }

    /// At `'`: a character (`'x'`, `'\n'`), or a lifetime or label (`'a`, `'static`), whose
    /// first character is not followed by a closing quote.
    fn quote(&mut self, line: usize) -> Result<Kind, String> {
        if self.peek(1).is_some_and(ident_start) && self.peek(2) != Some('\'') {
            self.bump();
            if self.rest().starts_with("r#") {
                self.at += 2;
            }
            self.eat_while(ident_continue);
            return Ok(Kind::Lifetime);
        }
        self.character(line)?;
        Ok(Kind::Literal)
    }

    /// A literal or raw identifier behind a prefix (`r"…"`, `r#"…"#`, `r#name`, `b"…"`,
    /// `b'…'`, `br#"…"#`, `c"…"`, `cr"…"`); `None` when the letters start an identifier.
    fn prefixed(&mut self, line: usize) -> Result<Option<Kind>, String> {
        let rest = self.rest();
        let (len, raw) = match rest.as_bytes() {
            [b'b' | b'c', b'r', ..] => (2, true),
            [b'r', ..] => (1, true),
            [b'b' | b'c', ..] => (1, false),
            _ => return Ok(None),
        };
        let after = &rest[len..];
        if !raw {
            return match after.chars().next() {
                Some('"') => {
                    self.at += len + 1;
                    self.string(line).map(|()| Some(Kind::Literal))
                }
                Some('\'') if rest.starts_with('b') => {
                    self.at += len;
                    self.character(line).map(|()| Some(Kind::Literal))
                }
                _ => Ok(None),
            };
        }
        let hashes = after.len() - after.trim_start_matches('#').len();
        match after[hashes..].chars().next() {
            // A raw string ends at the first `"` followed by as many `#`: it has no escapes.
            Some('"') => {
                self.at += len + hashes + 1;
                let end = format!("\"{}", "#".repeat(hashes));
                let Some(at) = self.rest().find(&end) else { return Err(unterminated(line, "raw string")) };
                self.line += self.rest()[..at].matches('\n').count();
                self.at += at + end.len();
                Ok(Some(Kind::Literal))
            }
            Some(c) if len == 1 && hashes == 1 && ident_start(c) => {
                self.at += 2;
                self.eat_while(ident_continue);
                Ok(Some(Kind::RawIdent))
            }
            _ => Ok(None),
        }
    }

    /// A number, with its suffix: `0x1f`, `1_000u32`, `2.5e-3f64`.
    fn number(&mut self) {
        let start = self.at;
        let based = ["0x", "0o", "0b"].iter().any(|p| self.rest().starts_with(p));
        self.eat_while(ident_continue);
        if !based && self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            self.eat_while(ident_continue);
        }
        let body = &self.src[start..self.at];
        let exponent = body.ends_with(['e', 'E'])
            && body[..body.len() - 1].chars().all(|c| c.is_ascii_digit() || c == '_' || c == '.');
        if !based
            && exponent
            && matches!(self.peek(0), Some('+' | '-'))
            && self.peek(1).is_some_and(|c| c.is_ascii_digit())
        {
            self.bump();
            self.eat_while(ident_continue);
        }
    }
}

fn unterminated(line: usize, what: &str) -> String {
    format!("{line}: a {what} that does not end")
}

/// The tokens of `src`, comments and whitespace left out; or, for a file rustc could not
/// read either (a string that does not end), `LINE: what`. Where this lexer and rustc's
/// could disagree on where code is (a shebang line), the file is refused, never guessed at.
pub(super) fn tokens(src: &str) -> Result<Vec<Token<'_>>, String> {
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    if src.strip_prefix("#!").is_some_and(|after| !after.trim_start().starts_with('[')) {
        return Err("1: a `#!` line that is no attribute, which rustc would skip unread as a shebang".into());
    }
    let mut lx = Lexer { src, at: 0, line: 1 };
    let mut out = Vec::new();
    while let Some(c) = lx.peek(0) {
        let (start, line) = (lx.at, lx.line);
        if c.is_whitespace() {
            lx.bump();
            continue;
        } else if lx.rest().starts_with("//") {
            lx.eat_while(|c| c != '\n');
            continue;
        } else if lx.rest().starts_with("/*") {
            lx.block_comment(line)?;
            continue;
        }
        let kind = if c == '\'' {
            lx.quote(line)?
        } else if c == '"' {
            lx.bump();
            lx.string(line)?;
            Kind::Literal
        } else if let Some(kind) = lx.prefixed(line)? {
            kind
        } else if ident_start(c) {
            lx.eat_while(ident_continue);
            Kind::Ident
        } else if c.is_ascii_digit() {
            lx.number();
            Kind::Literal
        } else {
            lx.bump();
            Kind::Punct
        };
        out.push(Token { kind, text: &src[start..lx.at], line });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<(Kind, &str)> {
        tokens(src).unwrap().into_iter().map(|t| (t.kind, t.text)).collect()
    }

    #[test]
    fn words_in_strings_and_comments_are_not_code() {
        use Kind::*;
        let src = "let s = \"unsafe { x }\"; // include_str!(\"a\")\n/// extern\nlet b = b\"asm\\\"\";";
        assert_eq!(
            texts(src),
            [
                (Ident, "let"),
                (Ident, "s"),
                (Punct, "="),
                (Literal, "\"unsafe { x }\""),
                (Punct, ";"),
                (Ident, "let"),
                (Ident, "b"),
                (Punct, "="),
                (Literal, "b\"asm\\\"\""),
                (Punct, ";"),
            ]
        );
        assert_eq!(super::super::refusal(src, "f.rs"), None);
    }

    #[test]
    fn raw_strings_end_at_their_own_hashes() {
        let src = "r#\"a \" unsafe\"# r\"\\\" x br##\"\"#\"##";
        assert_eq!(
            texts(src),
            [
                (Kind::Literal, "r#\"a \" unsafe\"#"),
                (Kind::Literal, "r\"\\\""),
                (Kind::Ident, "x"),
                (Kind::Literal, "br##\"\"#\"##")
            ]
        );
        assert!(tokens("r#\"never ends\"").unwrap_err().contains("raw string that does not end"));
    }

    #[test]
    fn block_comments_nest() {
        let src = "a /* x /* unsafe */ still a comment */ b /*/ c */ d";
        assert_eq!(texts(src), [(Kind::Ident, "a"), (Kind::Ident, "b"), (Kind::Ident, "d")]);
        let t = tokens("/* one\n/* two\n*/\n*/ x").unwrap();
        assert_eq!((t[0].text, t[0].line), ("x", 4));
        assert!(tokens("/* /* */").unwrap_err().starts_with("1: a block comment"));
    }

    #[test]
    fn lifetimes_are_not_characters() {
        use Kind::*;
        let src = "fn f<'a>(x: &'a str) -> char { 'a' } '\\'' '\\u{1F600}' b'\\\\' 'static 'é'";
        let got: Vec<(Kind, &str)> = texts(src).into_iter().filter(|(k, _)| *k != Punct).collect();
        assert_eq!(
            got,
            [
                (Ident, "fn"),
                (Ident, "f"),
                (Lifetime, "'a"),
                (Ident, "x"),
                (Lifetime, "'a"),
                (Ident, "str"),
                (Ident, "char"),
                (Literal, "'a'"),
                (Literal, "'\\''"),
                (Literal, "'\\u{1F600}'"),
                (Literal, "b'\\\\'"),
                (Lifetime, "'static"),
                (Literal, "'é'"),
            ]
        );
    }

    #[test]
    fn numbers_and_raw_identifiers() {
        use Kind::*;
        assert_eq!(
            texts("0x1f_u8 2.5e-3f64 1..2 t.0 r#unsafe r#type"),
            [
                (Literal, "0x1f_u8"),
                (Literal, "2.5e-3f64"),
                (Literal, "1"),
                (Punct, "."),
                (Punct, "."),
                (Literal, "2"),
                (Ident, "t"),
                (Punct, "."),
                (Literal, "0"),
                (RawIdent, "r#unsafe"),
                (RawIdent, "r#type"),
            ]
        );
    }
}
