//! A small XML well-formedness check.

/// A small well-formedness check, enough for hand-written SVG and the JUnit XML `lab/check`
/// writes: one root element, tags
/// balanced, attributes quoted and unique, entities known, comments closed.
pub fn check_xml(text: &str) -> Result<String, String> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut stack: Vec<String> = Vec::new();
    let mut root: Option<String> = None;
    let name_at = |i: usize| -> (String, usize) {
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b"_:.-".contains(&b[j])) {
            j += 1;
        }
        (text[i..j].to_string(), j)
    };
    let check_entities = |s: &str, at: usize| -> Result<(), String> {
        let mut rest = s;
        while let Some(k) = rest.find('&') {
            let after = &rest[k + 1..];
            let end = after.find(';').ok_or(format!("bare & near byte {at}"))?;
            let ent = &after[..end];
            let ok = ["amp", "lt", "gt", "quot", "apos"].contains(&ent)
                || ent.strip_prefix("#x").is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
                || ent.strip_prefix('#').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
            if !ok {
                return Err(format!("unknown entity &{ent}; near byte {at}"));
            }
            rest = &after[end + 1..];
        }
        Ok(())
    };
    while i < b.len() {
        if b[i] != b'<' {
            let j = text[i..].find('<').map_or(b.len(), |k| i + k);
            let chunk = &text[i..j];
            if stack.is_empty() && !chunk.trim().is_empty() {
                return Err(format!("text outside the root element at byte {i}"));
            }
            check_entities(chunk, i)?;
            i = j;
            continue;
        }
        let rest = &text[i..];
        if rest.starts_with("<?") {
            i += rest.find("?>").ok_or("unclosed <?")? + 2;
        } else if rest.starts_with("<!--") {
            let end = rest.find("-->").ok_or("unclosed comment")?;
            if rest[4..end].contains("--") {
                return Err(format!("`--` inside a comment at byte {i}"));
            }
            i += end + 3;
        } else if rest.starts_with("<![CDATA[") {
            i += rest.find("]]>").ok_or("unclosed CDATA")? + 3;
        } else if rest.starts_with("<!") {
            return Err(format!("DOCTYPE/declaration at byte {i}: not expected in an SVG"));
        } else if rest.starts_with("</") {
            let (name, j) = name_at(i + 2);
            let close = text[j..].find('>').ok_or("unclosed end tag")?;
            if !text[j..j + close].trim().is_empty() {
                return Err(format!("junk in end tag </{name}> at byte {i}"));
            }
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> at byte {i} closes {other:?}")),
            }
            i = j + close + 1;
        } else {
            let (name, mut j) = name_at(i + 1);
            if name.is_empty() {
                return Err(format!("bad tag at byte {i}"));
            }
            let mut attrs = std::collections::BTreeSet::new();
            loop {
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if j >= b.len() {
                    return Err(format!("unclosed <{name}"));
                }
                if b[j] == b'>' {
                    if root.is_none() {
                        root = Some(name.clone());
                    } else if stack.is_empty() {
                        return Err(format!("second root element <{name}> at byte {i}"));
                    }
                    stack.push(name.clone());
                    j += 1;
                    break;
                }
                if text[j..].starts_with("/>") {
                    if root.is_none() {
                        root = Some(name.clone());
                    } else if stack.is_empty() {
                        return Err(format!("second root element <{name}> at byte {i}"));
                    }
                    j += 2;
                    break;
                }
                let (attr, k) = name_at(j);
                if attr.is_empty() || k >= b.len() || b[k] != b'=' {
                    return Err(format!("bad attribute in <{name}> at byte {j}"));
                }
                if !attrs.insert(attr.clone()) {
                    return Err(format!("duplicate attribute {attr} in <{name}> at byte {j}"));
                }
                let q = b[k + 1];
                if q != b'"' && q != b'\'' {
                    return Err(format!("unquoted attribute {attr} in <{name}> at byte {j}"));
                }
                let vend = text[k + 2..].find(q as char).ok_or("unclosed attribute value")? + k + 2;
                let value = &text[k + 2..vend];
                if value.contains('<') {
                    return Err(format!("`<` in attribute {attr} at byte {j}"));
                }
                check_entities(value, j)?;
                j = vend + 1;
            }
            i = j;
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> is never closed"));
    }
    root.ok_or_else(|| "no root element".to_string())
}
