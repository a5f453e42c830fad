//! Redaction: a record holds no Secret data unless the plugin's settings keep it
//! ([`crate::record::select::Secrets`]).
//!
//! - Every Kubernetes Secret (`apiVersion: v1`, `kind: Secret`) anywhere in the record (the
//!   primary, `get`, `list` and `secondaries` answers, dependents' states, desired objects; also
//!   inside JSON text) keeps its keys, and each value of `data` and `stringData` becomes
//!   `"<redacted: N bytes>"`, N the value's length in bytes (decoded, for `data`); in `data`, the
//!   marker is base64 encoded like the value it replaces, so that a plugin that decodes the
//!   Secret as Kubernetes' type still can. A plugin that checks which keys are present replays
//!   the same; one that reads a value reads the marker.
//!   The kubectl annotation that copies the whole object (`last-applied-configuration`) is
//!   replaced the same way. Objects answered to a read of kind Secret count as Secrets even when
//!   they carry no `kind`.
//! - Then every value found (the `data` text, its decoded bytes when they are UTF-8, and
//!   `stringData`) of at least [`MIN_SCRUBBED`] bytes is scrubbed from what the guest wrote: its
//!   log lines, its outgoing HTTP requests, and its endings (status, desired objects, events,
//!   errors). Wherever it appears there, whole or inside a longer string, it becomes the marker
//!   of its length. A guest that logs or copies what it read replays the same from a redacted
//!   record, since it reads the marker and writes it where the record has it. Shorter values
//!   (`true`, `1`) are not looked for: they would match unrelated text. What the host handed the
//!   guest (requests, answers to reads, other than Secrets) is left as it was, so that replays
//!   are answered as recorded; a value that appears in an output by coincidence (a Secret's
//!   `username: postgres` and an object named `postgres`) is replaced there too, and that output
//!   then does not replay bit-exact.
//! - The credentials the guest itself put in an outgoing HTTP request (the value of each
//!   [`CREDENTIAL_HEADERS`] header, after the scrubbing above) become the marker of their length.
//!   A replay matches such a header by its length ([`crate::record::replay`]), so a plugin that
//!   sends a token it holds still replays bit-exact. The headers the host adds from Secrets (an
//!   `http-grant`'s secret headers) never reach a record.
//! - [`Record::redacted`] says whether anything was replaced.

use serde_json::{Map, Value};

use super::format::{Import, ReadError, Record};

/// The shortest secret value scrubbed from what the guest wrote.
pub const MIN_SCRUBBED: usize = 8;

/// The request headers whose values are credentials, in lower case.
pub const CREDENTIAL_HEADERS: [&str; 4] = ["authorization", "proxy-authorization", "cookie", "x-api-key"];

/// The annotation in which `kubectl apply` keeps a copy of the whole object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What replaces a secret value of `len` bytes.
pub fn marker(len: usize) -> String {
    format!("<redacted: {len} bytes>")
}

/// Whether `text` is a marker.
fn is_marker(text: &str) -> bool {
    let len = text.strip_prefix("<redacted: ").and_then(|rest| rest.strip_suffix(" bytes>"));
    len.is_some_and(|len| len.parse::<usize>().is_ok())
}

/// Redacts `record` in place (see the module's rule); returns how many values were replaced and
/// sets [`Record::redacted`] when there were any. An error only when the record does not survive
/// its own JSON round trip: the record must then not be written.
pub fn redact(record: &mut Record) -> Result<usize, ReadError> {
    let malformed = |e: serde_json::Error| ReadError::Malformed(e.to_string());
    let mut tree = serde_json::to_value(&*record).map_err(malformed)?;
    let mut found = Found::default();
    hide_secrets(&mut tree, false, &mut found);
    found.values.retain(|value| value.len() >= MIN_SCRUBBED);
    found.values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.values.dedup();
    let values = std::mem::take(&mut found.values);
    scrub_outputs(&mut tree, &values, &mut found.replaced);
    if found.replaced > 0 {
        *record = serde_json::from_value(tree).map_err(malformed)?;
    }
    let replaced = found.replaced + hide_credentials(record);
    record.redacted |= replaced > 0;
    Ok(replaced)
}

/// Replaces the value of every [`CREDENTIAL_HEADERS`] header of the guest's HTTP requests by the
/// marker of its length; returns how many it replaced.
fn hide_credentials(record: &mut Record) -> usize {
    let headers = record.steps.iter_mut().flat_map(|step| &mut step.calls).filter_map(|call| match &mut call.import {
        Import::Http { headers, .. } => Some(headers),
        _ => None,
    });
    let credentials = headers
        .flatten()
        .filter(|(name, value)| CREDENTIAL_HEADERS.contains(&name.to_ascii_lowercase().as_str()) && !is_marker(value));
    credentials.map(|(_, value)| *value = marker(value.len())).count()
}

/// What redaction found and did.
#[derive(Default)]
struct Found {
    /// Secret values, to scrub elsewhere.
    values: Vec<String>,
    /// Values replaced.
    replaced: usize,
}

/// Hides the data of every Secret in `value`; `secret` says that objects met here are Secrets
/// whatever their `kind` (answers to a read of kind Secret). Strings holding JSON text are
/// parsed, and written again only when something in them changed.
fn hide_secrets(value: &mut Value, secret: bool, found: &mut Found) {
    match value {
        Value::Object(object) => {
            if secret || is_secret(object) {
                hide_data(object, found);
            }
            let reads_secrets = reads_secrets(object);
            for (key, field) in object.iter_mut() {
                hide_secrets(field, secret || (reads_secrets && key == "answer"), found);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| hide_secrets(item, secret, found)),
        Value::String(text) => in_json_text(text, |inner| hide_secrets(inner, secret, found)),
        _ => {}
    }
}

/// Runs `f` on the JSON in `text`, if it holds an object or a list, and writes it back if `f`
/// changed it.
fn in_json_text(text: &mut String, f: impl FnOnce(&mut Value)) {
    if !text.trim_start().starts_with(['{', '[']) {
        return;
    }
    let Ok(mut inner) = serde_json::from_str::<Value>(text) else { return };
    let before = inner.clone();
    f(&mut inner);
    if inner != before {
        *text = inner.to_string();
    }
}

/// Whether `object` is a Kubernetes Secret.
fn is_secret(object: &Map<String, Value>) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && object.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// Whether `object` is a recorded read (`get`, `list`, `secondaries`) of kind Secret.
fn reads_secrets(object: &Map<String, Value>) -> bool {
    let import = object.get("import").and_then(Value::as_str);
    let kind = object.get("kind");
    matches!(import, Some("get" | "list" | "secondaries"))
        && kind.and_then(|k| k.get("kind")).and_then(Value::as_str) == Some("Secret")
        && kind.and_then(|k| k.get("group")).and_then(Value::as_str).unwrap_or_default().is_empty()
}

/// Replaces the values of a Secret's `data` and `stringData`, and its last-applied copy.
fn hide_data(secret: &mut Map<String, Value>, found: &mut Found) {
    for (field, encoded) in [("data", true), ("stringData", false)] {
        let Some(Value::Object(values)) = secret.get_mut(field) else { continue };
        for value in values.values_mut() {
            let Value::String(text) = value else { continue };
            let bytes = if encoded { decode_base64(text) } else { Some(text.clone().into_bytes()) };
            let len = bytes.as_ref().map_or(text.len(), Vec::len);
            found.values.push(text.clone());
            if let Some(plain) = bytes.and_then(|b| String::from_utf8(b).ok()).filter(|p| !p.is_empty()) {
                found.values.push(plain);
            }
            let marker = marker(len);
            *value = Value::String(if encoded { encode_base64(marker.as_bytes()) } else { marker });
            found.replaced += 1;
        }
    }
    let annotations = secret.get_mut("metadata").and_then(|m| m.get_mut("annotations"));
    if let Some(copy) = annotations.and_then(|a| a.get_mut(LAST_APPLIED)) {
        *copy = Value::String(marker(copy.as_str().map_or(0, str::len)));
        found.replaced += 1;
    }
}

/// The import calls whose arguments are the guest's output.
const OUTPUT_IMPORTS: [&str; 2] = ["log", "http"];

/// Replaces the secret `values` in what the guest wrote: the arguments of its logs and HTTP
/// requests and its endings (the record as JSON: `steps[].calls[]`, `steps[].ending`).
fn scrub_outputs(record: &mut Value, values: &[String], replaced: &mut usize) {
    let Some(steps) = record.get_mut("steps").and_then(Value::as_array_mut) else { return };
    for step in steps {
        for call in step.get_mut("calls").and_then(Value::as_array_mut).into_iter().flatten() {
            let Some(call) = call.as_object_mut() else { continue };
            if !call.get("import").and_then(Value::as_str).is_some_and(|name| OUTPUT_IMPORTS.contains(&name)) {
                continue;
            }
            for (field, value) in call.iter_mut() {
                if field != "import" && field != "answer" {
                    scrub(value, values, replaced);
                }
            }
        }
        if let Some(ending) = step.get_mut("ending") {
            scrub(ending, values, replaced);
        }
    }
}

/// Replaces the secret `values` wherever they appear in the strings of `value`, JSON text
/// included, counting the replacements in `replaced`.
fn scrub(value: &mut Value, values: &[String], replaced: &mut usize) {
    match value {
        Value::Object(object) => object.values_mut().for_each(|field| scrub(field, values, replaced)),
        Value::Array(items) => items.iter_mut().for_each(|item| scrub(item, values, replaced)),
        Value::String(text) => {
            in_json_text(text, |inner| scrub(inner, values, replaced));
            for secret in values {
                if text.contains(secret.as_str()) {
                    *replaced += text.matches(secret.as_str()).count();
                    *text = text.replace(secret.as_str(), &marker(secret.len()));
                }
            }
        }
        _ => {}
    }
}

/// `bytes` in standard base64, padded.
fn encode_base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk.iter().enumerate().fold(0_u32, |w, (i, b)| w | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            let digit = (word >> (18 - 6 * i)) & 63;
            text.push(if i <= chunk.len() { char::from(DIGITS[digit as usize]) } else { '=' });
        }
    }
    text
}

/// The bytes of standard base64 `text` (padding optional), or `None` when it is not base64.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits = text.trim_end_matches('=').bytes().map(sextet).collect::<Option<Vec<u8>>>()?;
    if digits.len() % 4 == 1 {
        return None;
    }
    let mut bytes = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let word = chunk.iter().enumerate().fold(0_u32, |w, (i, d)| w | (u32::from(*d) << (18 - 6 * i)));
        let [_, a, b, c] = word.to_be_bytes();
        bytes.extend_from_slice(&[a, b, c][..chunk.len() - 1]);
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::record::format::{Answer, Call, Ending, Import};
    use crate::record::sample::{self, GENERATED, GENERATED_BASE64, PASSWORD, PASSWORD_BASE64, TOKEN};

    fn text(record: &Record) -> String {
        String::from_utf8(record.to_vec()).unwrap()
    }

    #[test]
    fn a_record_of_a_plugin_reading_a_secret_holds_none_of_its_bytes() {
        let mut record = sample::record();
        let before = text(&record);
        for value in [PASSWORD, PASSWORD_BASE64, TOKEN, GENERATED_BASE64] {
            assert!(before.contains(value), "the sample holds {value}");
        }
        let replaced = redact(&mut record).unwrap();
        let after = text(&record);
        for value in [PASSWORD, PASSWORD_BASE64, TOKEN, GENERATED, GENERATED_BASE64] {
            assert!(!after.contains(value), "{value} is left in {after}");
        }
        assert!(record.redacted);
        // Both reads of the Secret (data and stringData), the desired Secret, the log line.
        assert_eq!(replaced, 6);
    }

    #[test]
    fn a_secret_value_copied_into_another_object_is_scrubbed_there() {
        let mut record = sample::record();
        let dsn = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "dsn" },
            "data": { "url": format!("postgres://app:{PASSWORD}@db"), "password": PASSWORD } });
        let Ending::Desired(desired) = &mut record.steps[0].ending else { panic!("desired") };
        desired[0].object = dsn.to_string();
        redact(&mut record).unwrap();
        let Ending::Desired(desired) = &record.steps[0].ending else { panic!("desired") };
        let dsn: Value = serde_json::from_str(&desired[0].object).unwrap();
        assert_eq!(
            dsn["data"],
            json!({ "url": "postgres://app:<redacted: 19 bytes>@db", "password": "<redacted: 19 bytes>" })
        );
    }

    #[test]
    fn a_redacted_secret_keeps_its_keys_and_the_lengths_of_its_values() {
        let mut record = sample::record();
        redact(&mut record).unwrap();
        let Answer::Object(Ok(Some(secret))) = &record.steps[1].calls[0].answer else { panic!("a get") };
        let secret: Value = serde_json::from_str(secret).unwrap();
        let password = secret["data"]["password"].as_str().unwrap();
        assert_eq!(decode_base64(password).unwrap(), b"<redacted: 19 bytes>", "base64, as Secrets' data is");
        assert_eq!(secret["stringData"], json!({ "token": "<redacted: 13 bytes>" }));
        assert_eq!(secret["metadata"]["name"], "db");
        let Ending::Desired(desired) = &record.steps[0].ending else { panic!("desired") };
        let generated: Value = serde_json::from_str(&desired[1].object).unwrap();
        let password = generated["data"]["password"].as_str().unwrap();
        assert_eq!(decode_base64(password).unwrap(), b"<redacted: 17 bytes>");
        let Import::Log { message, .. } = &record.steps[1].calls[1].import else { panic!("a log") };
        assert_eq!(message, "connecting with <redacted: 19 bytes>");
    }

    #[test]
    fn what_is_not_a_secret_is_left_byte_for_byte() {
        let mut record = sample::record();
        let config = record.steps[1].calls[2].clone();
        let pods = record.steps[1].calls[3].clone();
        let ending = record.steps[1].ending.clone();
        redact(&mut record).unwrap();
        assert_eq!(record.steps[1].calls[2], config);
        assert_eq!(record.steps[1].calls[3], pods);
        assert_eq!(record.steps[1].ending, ending);
    }

    #[test]
    fn a_record_without_secrets_is_not_marked_redacted() {
        let mut record = sample::record();
        for step in &mut record.steps {
            step.calls.retain(|call| !matches!(&call.import, Import::Get { kind, .. } if kind.kind == "Secret"));
            step.calls.retain(|call| !matches!(&call.import, Import::Log { .. }));
        }
        record.steps.remove(0);
        let before = record.clone();
        assert_eq!(redact(&mut record), Ok(0));
        assert_eq!(record, before);
    }

    #[test]
    fn objects_read_as_secrets_are_redacted_without_a_kind() {
        let bare = json!({ "metadata": { "name": "db" }, "data": { "k": "c2hvcnQ=" } });
        let mut record = sample::record();
        let list = Import::List { kind: sample::core_kind("Secret"), namespace: None, label_selector: None };
        record.steps[1].calls = vec![Call { import: list, answer: Answer::Objects(Ok(vec![bare.to_string()])) }];
        record.steps.remove(0);
        assert_eq!(redact(&mut record), Ok(1));
        let Answer::Objects(Ok(objects)) = &record.steps[0].calls[0].answer else { panic!("a list") };
        let marker = encode_base64(b"<redacted: 5 bytes>");
        assert_eq!(objects[0], format!(r#"{{"data":{{"k":"{marker}"}},"metadata":{{"name":"db"}}}}"#));
    }

    #[test]
    fn short_values_and_what_the_guest_was_handed_are_not_scrubbed() {
        let mut record = sample::record();
        let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "flag" },
            "stringData": { "enabled": "true", "database": "postgres-main" } });
        let copy = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "postgres-main" } });
        let read = sample::get("ConfigMap", "postgres-main", Some(copy));
        let calls = vec![sample::get("Secret", "flag", Some(secret)), read.clone(), sample::log("true, postgres-main")];
        record.steps[1].calls = calls;
        record.steps.remove(0);
        assert_eq!(redact(&mut record), Ok(3));
        assert_eq!(record.steps[0].calls[1], read);
        let Import::Log { message, .. } = &record.steps[0].calls[2].import else { panic!("a log") };
        assert_eq!(message, "true, <redacted: 13 bytes>");
    }

    #[test]
    fn a_secret_sent_in_an_http_request_is_scrubbed_from_it() {
        let mut record = sample::record();
        let import = Import::Http {
            method: "POST".into(),
            url: "https://api.example.com/v1".into(),
            headers: vec![("x-signed-by".into(), format!("Bearer {TOKEN}"))],
            body: crate::record::format::Body::Text(format!("{{\"password\":\"{PASSWORD}\"}}")),
        };
        record.steps[1].calls.push(Call { import, answer: Answer::Http(Err("refused".into())) });
        redact(&mut record).unwrap();
        let Import::Http { headers, body, .. } = &record.steps[1].calls[5].import else { panic!("http") };
        assert_eq!(headers[0].1, "Bearer <redacted: 13 bytes>");
        assert_eq!(body.bytes(), br#"{"password":"<redacted: 19 bytes>"}"#);
    }

    #[test]
    fn credentials_the_guest_sends_keep_only_their_length_and_other_headers_stay() {
        let mut record = sample::record();
        record.steps.remove(0);
        record.steps[0].calls = vec![sample::http(
            "GET",
            vec![
                ("Authorization".into(), "Bearer hard-coded".into()),
                ("x-api-key".into(), "k".into()),
                ("accept".into(), "application/json".into()),
            ],
        )];
        assert_eq!(redact(&mut record), Ok(2));
        assert!(record.redacted);
        let Import::Http { headers, .. } = &record.steps[0].calls[0].import else { panic!("http") };
        let values: Vec<&str> = headers.iter().map(|(_, value)| value.as_str()).collect();
        assert_eq!(values, ["<redacted: 17 bytes>", "<redacted: 1 bytes>", "application/json"]);
        let again = record.clone();
        assert_eq!(redact(&mut record), Ok(0), "a marker is not redacted again");
        assert_eq!(record, again);
    }

    #[test]
    fn the_kubectl_copy_of_a_secret_is_redacted_too() {
        let copy = json!({ "data": { "password": PASSWORD_BASE64 } }).to_string();
        let secret = json!({ "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "db", "annotations": { LAST_APPLIED: copy } } });
        let mut record = sample::record();
        record.steps[1].calls = vec![sample::get("Secret", "db", Some(secret))];
        record.steps.remove(0);
        redact(&mut record).unwrap();
        assert!(!text(&record).contains(PASSWORD_BASE64));
    }

    #[test]
    fn base64_encodes_as_the_standard_alphabet_with_padding() {
        assert_eq!(encode_base64(b""), "");
        assert_eq!(encode_base64(b"f"), "Zg==");
        assert_eq!(encode_base64(b"fo"), "Zm8=");
        assert_eq!(encode_base64(b"foo"), "Zm9v");
        assert_eq!(encode_base64(b"foob\xff"), "Zm9vYv8=");
        for text in ["<redacted: 19 bytes>", "a", "ab", "abc"] {
            assert_eq!(decode_base64(&encode_base64(text.as_bytes())).unwrap(), text.as_bytes());
        }
    }

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64(PASSWORD_BASE64).unwrap(), PASSWORD.as_bytes());
        assert_eq!(decode_base64("YWI").unwrap(), b"ab");
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(decode_base64("not base64!"), None);
        assert_eq!(decode_base64("abcde"), None);
    }
}
