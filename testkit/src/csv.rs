//! Reading a CSV record: the grader reads Moodle's grading worksheet, the grader's test
//! reads the `moodle.csv` it wrote.

/// The fields of one CSV record (RFC 4180: `"` quotes, `""` in quotes is a `"`), the record
/// on one line: a quoted field that holds a newline is not read.
pub fn csv_fields(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    fields.push(field);
    fields
}

#[cfg(test)]
mod tests {
    use super::csv_fields;

    #[test]
    fn quotes_commas_and_doubled_quotes() {
        assert_eq!(csv_fields(r#"a,"b, c","say ""hi""",,"#), ["a", "b, c", "say \"hi\"", "", ""]);
    }
}
