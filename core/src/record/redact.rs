//! Redaction: a record holds no Secret data and no credentials the guest sent or read, unless the
//! plugin's settings keep them ([`crate::record::select::Secrets`]). Each value replaced becomes
//! the marker of its length, `<redacted: N bytes>` ([`marker`]).
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
//! - A response the guest marked as sensitive (its request carries the header
//!   [`SENSITIVE_RESPONSE`], which the host takes off before the request leaves; the SDKs set it,
//!   e.g. `wasmop_guest::http::Request::sensitive_response`) keeps its status and headers, and its
//!   body becomes the marker of its length. What it held is then scrubbed from what the guest
//!   wrote, as Secret values are: the whole body, and when it is JSON each of its strings, when it
//!   is a form (`a=1&b=2`) each value, of at least [`MIN_SCRUBBED`] bytes.
//! - Credentials in the guest's HTTP requests and in the responses it read keep only their
//!   length (after the scrubbing above):
//!   - the value of every header, sent or received, whose lower-case name contains one of
//!     [`CREDENTIAL_WORDS`] (`authorization`, `cookie`, `set-cookie`, `x-api-key`,
//!     `x-auth-token`, ...);
//!   - in a `www-authenticate` or `proxy-authenticate` challenge, the schemes and parameter names
//!     are kept, and the values of [`CHALLENGE_PARAMETERS`] (`realm`, `scope`, `error`,
//!     `error_description`, ...); every other value (`access_token`, a Digest `nonce`, a
//!     `Negotiate` token) becomes the marker; a value that does not read as challenges becomes
//!     the marker whole;
//!   - in the request's URL, the value of every query parameter whose lower-case name
//!     (percent-decoded) contains one of [`CREDENTIAL_WORDS`] (`access_token`, `api_key`,
//!     `X-Amz-Signature`), its length as written in the URL, and the user information before an
//!     `@` in the authority.
//!
//!   A replay matches a request header or a URL by applying the same rule to what the guest
//!   asks ([`crate::record::replay`]), so a plugin that sends a token of the recorded length
//!   still replays bit-exact. A replay hands the guest the recorded response, markers included:
//!   a plugin that reads a redacted response header, or parses a sensitive body, reads the
//!   marker (`<redacted: N bytes>` as the body's text), and its replay is then not bit-exact if
//!   what it does depends on it. The headers the host adds from Secrets (an `http-grant`'s secret
//!   headers) never reach a record.
//! - [`Record::redacted`] says whether anything was replaced.
//!
//! What a redacted record can still hold: a value the guest copied from a response it did not
//! mark as sensitive, or from a header, into what it wrote (objects, status, logs); the bodies
//! of responses not marked as sensitive; the bodies of its requests (a `client_secret` it posts
//! too, unless it is a Secret value the scrubbing finds); Secret values shorter than
//! [`MIN_SCRUBBED`] bytes where the guest copied them; header names, methods, URL paths and
//! query parameters not named like credentials; and everything the host handed the guest that
//! is not a Secret (objects of other kinds, which may hold credentials a cluster keeps outside
//! Secrets). With `secrets: keep` ([`crate::record::select::Secrets::Keep`]) nothing is
//! redacted.

use serde_json::{Map, Value};

use super::format::{Answer, Body, Import, ReadError, Record};

/// The shortest secret value scrubbed from what the guest wrote.
pub const MIN_SCRUBBED: usize = 8;

/// The words that make the name of a header or a query parameter a credential's, when its lower
/// case contains one of them.
pub const CREDENTIAL_WORDS: [&str; 10] =
    ["token", "auth", "key", "secret", "cookie", "password", "passwd", "credential", "signature", "session"];

/// The headers that carry challenges, whose schemes and harmless parameters are kept.
const CHALLENGE_HEADERS: [&str; 2] = ["www-authenticate", "proxy-authenticate"];

/// The parameters of a challenge whose values are kept; every other value is redacted.
pub const CHALLENGE_PARAMETERS: [&str; 10] =
    ["realm", "scope", "error", "error_description", "error_uri", "charset", "algorithm", "qop", "stale", "domain"];

/// The request header by which a plugin marks the response as sensitive (any value): the host
/// takes it off before the request leaves, and redaction keeps only the length of the body.
pub const SENSITIVE_RESPONSE: &str = "wasmop-sensitive-response";

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
    let mut found = Found::default();
    hide_sensitive_bodies(record, &mut found);
    let mut tree = serde_json::to_value(&*record).map_err(malformed)?;
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

/// Redacts a webhook fixture (`review:`, `expect:`, as `wasmop run --record` writes one per
/// recorded webhook call) by the rule of records: every Secret in the review keeps its keys and
/// each value becomes its marker, and the values found are scrubbed from the answer expected (a
/// message, warning or patch that copied one). Returns how many values were replaced.
pub fn redact_review(fixture: &mut Value) -> usize {
    let mut found = Found::default();
    if let Some(review) = fixture.get_mut("review") {
        hide_secrets(review, false, &mut found);
    }
    found.values.retain(|value| value.len() >= MIN_SCRUBBED);
    found.values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.values.dedup();
    let values = std::mem::take(&mut found.values);
    if let Some(expect) = fixture.get_mut("expect") {
        scrub(expect, &values, &mut found.replaced);
    }
    found.replaced
}

/// Whether a header or query parameter named `name` carries a credential: its lower case
/// contains one of [`CREDENTIAL_WORDS`].
pub fn is_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
}

/// Whether the guest's request `headers` mark the response as sensitive.
pub fn marks_sensitive(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(SENSITIVE_RESPONSE))
}

/// Replaces the body of every response the guest marked as sensitive by the marker of its
/// length, keeping what it held in `found` to scrub from the outputs.
fn hide_sensitive_bodies(record: &mut Record, found: &mut Found) {
    for call in record.steps.iter_mut().flat_map(|step| &mut step.calls) {
        let (Import::Http { headers, .. }, Answer::Http(Ok(response))) = (&call.import, &mut call.answer) else {
            continue;
        };
        let body = response.body.bytes();
        if !marks_sensitive(headers) || body.is_empty() || std::str::from_utf8(body).is_ok_and(is_marker) {
            continue;
        }
        if let Ok(text) = std::str::from_utf8(body) {
            found.values.push(text.to_owned());
            match serde_json::from_str::<Value>(text) {
                Ok(json) => strings(&json, &mut found.values),
                Err(_) => found.values.extend(form_values(text).map(str::to_owned)),
            }
        }
        response.body = Body::Text(marker(body.len()));
        found.replaced += 1;
    }
}

/// Every string in `value`, pushed onto `strings`.
fn strings(value: &Value, strings_found: &mut Vec<String>) {
    match value {
        Value::String(text) => strings_found.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| strings(item, strings_found)),
        Value::Object(object) => object.values().for_each(|field| strings(field, strings_found)),
        _ => {}
    }
}

/// The values of `text` read as a form, `a=1&b=2`: `1`, `2`.
fn form_values(text: &str) -> impl Iterator<Item = &str> {
    text.split('&').filter_map(|pair| pair.split_once('=')).map(|(_, value)| value)
}

/// Replaces the credentials in the guest's HTTP requests and the responses it read (see the
/// module's rule); returns how many it replaced.
fn hide_credentials(record: &mut Record) -> usize {
    let mut replaced = 0;
    for call in record.steps.iter_mut().flat_map(|step| &mut step.calls) {
        let Import::Http { url, headers, .. } = &mut call.import else { continue };
        let (hidden, in_url) = hide_url(url);
        *url = hidden;
        replaced += in_url + headers.iter_mut().map(|(name, value)| hide_header(name, value)).sum::<usize>();
        if let Answer::Http(Ok(response)) = &mut call.answer {
            replaced += response.headers.iter_mut().map(|(name, value)| hide_header(name, value)).sum::<usize>();
        }
    }
    replaced
}

/// Replaces the credentials in the header `name: value`; returns how many it replaced.
fn hide_header(name: &str, value: &mut String) -> usize {
    if CHALLENGE_HEADERS.iter().any(|challenge| name.eq_ignore_ascii_case(challenge)) {
        let (hidden, replaced) = hide_challenges(value);
        *value = hidden;
        replaced
    } else if is_credential(name) && !is_marker(value) {
        *value = marker(value.len());
        1
    } else {
        0
    }
}

/// `url` with the user information of its authority and the values of its credential query
/// parameters replaced by their markers, and how many were replaced. A replay compares a
/// recorded URL with this of the guest's.
pub fn hide_url(url: &str) -> (String, usize) {
    let mut replaced = 0;
    let (url, fragment) = url.split_once('#').map_or((url, None), |(url, fragment)| (url, Some(fragment)));
    let (base, query) = url.split_once('?').map_or((url, None), |(base, query)| (base, Some(query)));
    let mut hidden = String::with_capacity(url.len());
    let authority_at = base.find("://").map_or(0, |at| at + 3);
    let authority_len = base[authority_at..].find('/').unwrap_or(base.len() - authority_at);
    match base[authority_at..authority_at + authority_len].rsplit_once('@') {
        Some((user, _)) if !user.is_empty() && !is_marker(user) => {
            hidden.push_str(&base[..authority_at]);
            hidden.push_str(&marker(user.len()));
            hidden.push_str(&base[authority_at + user.len()..]);
            replaced += 1;
        }
        _ => hidden.push_str(base),
    }
    if let Some(query) = query {
        hidden.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                hidden.push('&');
            }
            match pair.split_once('=') {
                Some((name, value))
                    if !value.is_empty() && !is_marker(value) && is_credential(&percent_decoded(name)) =>
                {
                    hidden.push_str(name);
                    hidden.push('=');
                    hidden.push_str(&marker(value.len()));
                    replaced += 1;
                }
                _ => hidden.push_str(pair),
            }
        }
    }
    if let Some(fragment) = fragment {
        hidden.push('#');
        hidden.push_str(fragment);
    }
    (hidden, replaced)
}

/// `text` with its `%XX` escapes decoded (lossily, as UTF-8).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped =
            bytes.get(i + 1..i + 3).and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (bytes[i], escaped) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// The value of a challenge header with every parameter value but those of
/// [`CHALLENGE_PARAMETERS`], and every `token68` (a `Negotiate` token), replaced by its marker,
/// and how many were replaced; the whole value's marker when it does not read as challenges.
fn hide_challenges(value: &str) -> (String, usize) {
    match challenges(value) {
        Some(hidden) => hidden,
        None if is_marker(value) => (value.to_owned(), 0),
        None => (marker(value.len()), 1),
    }
}

/// Where a challenge header's reader is (RFC 9110, section 11.6.1).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Challenge {
    /// At the start of the value or after a comma: a scheme or a parameter.
    Item,
    /// After a scheme: a `token68`, a parameter or a comma.
    Scheme,
    /// After a parameter or a `token68`: a comma.
    Done,
}

/// [`hide_challenges`] when `value` reads as challenges.
fn challenges(value: &str) -> Option<(String, usize)> {
    let bytes = value.as_bytes();
    let word = |from: usize, allowed: fn(u8) -> bool| from + bytes[from..].iter().take_while(|b| allowed(**b)).count();
    let spaces = |from: usize| word(from, |b| b == b' ' || b == b'\t');
    let mut hidden = String::with_capacity(value.len());
    let (mut replaced, mut at, mut state) = (0, 0, Challenge::Item);
    // Writes `text`, a value of the parameter `name` (`None`: a token68), or its marker.
    let mut write = |hidden: &mut String, name: Option<&str>, text: &str| {
        let kept = name.is_some_and(|name| CHALLENGE_PARAMETERS.contains(&name.to_ascii_lowercase().as_str()));
        if kept || text.is_empty() || is_marker(text) {
            hidden.push_str(text);
        } else {
            hidden.push_str(&marker(text.len()));
            replaced += 1;
        }
    };
    while at < bytes.len() {
        let blank = spaces(at);
        if blank > at {
            hidden.push_str(&value[at..blank]);
            at = blank;
            continue;
        }
        if bytes[at] == b',' {
            hidden.push(',');
            (at, state) = (at + 1, Challenge::Item);
            continue;
        }
        if state == Challenge::Scheme
            && let Some(end) = marker_at(value, at)
        {
            hidden.push_str(&value[at..end]);
            (at, state) = (end, Challenge::Done);
            continue;
        }
        let end = word(at, is_token68);
        if end == at || state == Challenge::Done {
            return None;
        }
        let name = &value[at..end];
        let equals = spaces(end);
        let parameter = (bytes.get(equals) == Some(&b'='))
            .then(|| spaces(equals + 1))
            .filter(|&start| bytes.get(start).is_some_and(|b| !matches!(b, b'=' | b',')));
        if let Some(start) = parameter {
            hidden.push_str(&value[at..start]);
            at = if bytes[start] == b'"' {
                let close = quoted_end(bytes, start)?;
                hidden.push('"');
                write(&mut hidden, Some(name), &value[start + 1..close]);
                hidden.push('"');
                close + 1
            } else {
                let end = marker_at(value, start).unwrap_or_else(|| word(start, is_tchar));
                if end == start {
                    return None;
                }
                write(&mut hidden, Some(name), &value[start..end]);
                end
            };
            state = Challenge::Done;
        } else if state == Challenge::Scheme {
            let end = word(end, |b| b == b'=');
            write(&mut hidden, None, &value[at..end]);
            (at, state) = (end, Challenge::Done);
        } else {
            hidden.push_str(name);
            (at, state) = (end, Challenge::Scheme);
        }
    }
    Some((hidden, replaced))
}

/// The end of the marker that starts at `at` in `text`, if one does.
fn marker_at(text: &str, at: usize) -> Option<usize> {
    let rest = text.get(at..)?;
    let end = rest.find('>')? + 1;
    is_marker(&rest[..end]).then_some(at + end)
}

/// The index of the closing quote of the quoted string that opens at `open`.
fn quoted_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut at = open + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at),
            _ => at += 1,
        }
    }
    None
}

/// Whether `byte` may be in an HTTP token (`tchar`).
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// Whether `byte` may be in a token or a `token68` (which also allows `/`).
fn is_token68(byte: u8) -> bool {
    is_tchar(byte) || byte == b'/'
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
    use crate::record::format::{Answer, Body, Call, Ending, HttpResponse, Import, Outcome};
    use crate::record::sample::{self, GENERATED, GENERATED_BASE64, PASSWORD, PASSWORD_BASE64, TOKEN};

    fn text(record: &Record) -> String {
        String::from_utf8(record.to_vec()).unwrap()
    }

    #[test]
    fn a_webhook_fixture_of_a_secret_holds_none_of_its_values_in_the_review_or_the_answer() {
        let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "db" },
                             "stringData": { "password": PASSWORD } });
        let mut fixture = json!({
            "review": { "webhook": "validating", "object": secret },
            "expect": { "allowed": false, "message": format!("password {PASSWORD} is too weak") },
        });
        assert_eq!(redact_review(&mut fixture), 2);
        let text = fixture.to_string();
        assert!(!text.contains(PASSWORD), "{text}");
        assert_eq!(fixture["review"]["object"]["stringData"]["password"], marker(PASSWORD.len()));
        assert_eq!(fixture["expect"]["message"], format!("password {} is too weak", marker(PASSWORD.len())));
        let mut plain = json!({ "review": { "object": { "kind": "WebPage" } }, "expect": { "allowed": true } });
        assert_eq!(redact_review(&mut plain), 0);
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

    /// A call of `method url` with the guest's `headers`, answered 200 with `response` headers
    /// and `body`.
    fn exchange(url: &str, headers: &[(&str, &str)], response: &[(&str, &str)], body: &str) -> Call {
        let pairs = |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
        let import =
            Import::Http { method: "GET".into(), url: url.into(), headers: pairs(headers), body: Body::default() };
        let response = HttpResponse { status: 200, headers: pairs(response), body: Body::Text(body.into()) };
        Call { import, answer: Answer::Http(Ok(response)) }
    }

    /// `record` with one step whose calls are `calls`, its ending `status`.
    fn with_calls(calls: Vec<Call>, status: &str) -> Record {
        let mut record = sample::record();
        record.steps.remove(0);
        record.steps[0].calls = calls;
        record.steps[0].ending = Ending::Reconciled(Outcome { status: Some(status.into()), ..Outcome::default() });
        record
    }

    fn response(record: &Record, call: usize) -> &HttpResponse {
        let Answer::Http(Ok(response)) = &record.steps[0].calls[call].answer else { panic!("a response") };
        response
    }

    #[test]
    fn credential_response_headers_keep_only_their_length_and_other_headers_stay() {
        let headers = [
            ("Set-Cookie", "sid=31d4d96e407aad42; Secure; HttpOnly"),
            ("X-Subject-Token", "gAAAAABk-token"),
            ("x-api-key-expires", "2026-12-01"),
            ("x-vault-secret-id", "7f3c"),
            ("content-type", "application/json"),
            ("etag", "\"7\""),
        ];
        let mut record = with_calls(vec![exchange("https://api.example.com/v1", &[], &headers, "{}")], "{}");
        assert_eq!(redact(&mut record), Ok(4));
        let values: Vec<&str> = response(&record, 0).headers.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, [marker(38).as_str(), &marker(14), &marker(10), &marker(4), "application/json", "\"7\""]);
        assert_eq!(response(&record, 0).headers[0].0, "Set-Cookie", "names are kept");
        let again = record.clone();
        assert_eq!(redact(&mut record), Ok(0), "a marker is not redacted again");
        assert_eq!(record, again);
    }

    #[test]
    fn a_challenge_keeps_its_scheme_and_harmless_parameters_and_loses_tokens() {
        let challenges = [
            (
                r#"Bearer realm="api", error="invalid_token", error_description="The access token expired""#,
                r#"Bearer realm="api", error="invalid_token", error_description="The access token expired""#,
            ),
            (
                r#"Bearer realm="api", access_token="abc123", scope="read write""#,
                r#"Bearer realm="api", access_token="<redacted: 6 bytes>", scope="read write""#,
            ),
            ("Negotiate oRswGaADCgEAoxIEEAEAAABDh+CIwTbjqQAAAAA=", "Negotiate <redacted: 40 bytes>"),
            (
                r#"Digest realm="x", nonce=dcd98b, opaque="5ccc", Basic realm="simple", charset=UTF-8"#,
                r#"Digest realm="x", nonce=<redacted: 6 bytes>, opaque="<redacted: 4 bytes>", Basic realm="simple", charset=UTF-8"#,
            ),
            (r#"Bearer realm="unterminated"#, "<redacted: 26 bytes>"),
        ];
        for (name, (challenge, redacted)) in ["www-authenticate", "Proxy-Authenticate"].iter().cycle().zip(challenges) {
            let call = exchange("https://api.example.com/v1", &[], &[(name, challenge)], "{}");
            let mut record = with_calls(vec![call], "{}");
            redact(&mut record).unwrap();
            assert_eq!(response(&record, 0).headers[0].1, redacted, "{name}: {challenge}");
            assert_eq!(record.redacted, challenge != redacted, "{challenge}");
            assert_eq!(redact(&mut record), Ok(0), "a marker is not redacted again: {redacted}");
        }
    }

    #[test]
    fn a_challenge_that_does_not_read_as_one_becomes_its_marker_whole() {
        for odd in ["=", "Bearer =", "Bearer a b", r#"Bearer x="a\""#, "Bearer é", "a=b c", "Basic realm=\"x\" t0k3n"]
        {
            let (hidden, replaced) = hide_challenges(odd);
            assert_eq!((hidden, replaced), (marker(odd.len()), 1), "{odd}");
        }
        assert_eq!(hide_challenges(""), (String::new(), 0));
        assert_eq!(hide_challenges("Basic , Bearer"), ("Basic , Bearer".into(), 0));
    }

    #[test]
    fn credential_query_parameters_and_user_information_keep_only_their_length() {
        let urls = [
            (
                "https://api.example.com/v1/things?page=2&access_token=abc123&API_KEY=k&q=x#top",
                "https://api.example.com/v1/things?page=2&access_token=<redacted: 6 bytes>&API_KEY=<redacted: 1 bytes>&q=x#top",
            ),
            (
                "https://api.example.com/x?api%5Fkey=12&flag&sessionId=",
                "https://api.example.com/x?api%5Fkey=<redacted: 2 bytes>&flag&sessionId=",
            ),
            (
                "https://user:pw@api.example.com/x?Signature=ab%2Fc",
                "https://<redacted: 7 bytes>@api.example.com/x?Signature=<redacted: 6 bytes>",
            ),
            ("https://api.example.com/v1/keys/7?page=2", "https://api.example.com/v1/keys/7?page=2"),
        ];
        for (url, redacted) in urls {
            let mut record = with_calls(vec![exchange(url, &[], &[], "{}")], "{}");
            redact(&mut record).unwrap();
            let Import::Http { url: recorded, .. } = &record.steps[0].calls[0].import else { panic!("http") };
            assert_eq!(recorded, redacted);
            assert_eq!(record.redacted, url != redacted, "{url}");
            let again = record.clone();
            assert_eq!(redact(&mut record), Ok(0), "a marker is not redacted again");
            assert_eq!(record, again);
        }
    }

    #[test]
    fn request_headers_named_like_credentials_keep_only_their_length() {
        let headers =
            [("X-Auth-Token", "t0ken"), ("x-client-secret", "s"), ("accept", "*/*"), (SENSITIVE_RESPONSE, "1")];
        let mut record = with_calls(vec![exchange("https://api.example.com/v1", &headers, &[], "{}")], "{}");
        assert_eq!(redact(&mut record), Ok(3), "two headers and the marked body");
        let Import::Http { headers, .. } = &record.steps[0].calls[0].import else { panic!("http") };
        let values: Vec<&str> = headers.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, [marker(5).as_str(), &marker(1), "*/*", "1"], "the mark stays, for replays to match");
    }

    #[test]
    fn a_response_marked_sensitive_keeps_only_its_length_and_its_values_are_scrubbed_from_outputs() {
        const ISSUED: &str = "eyJhbGciOiJIUzI1NiJ9.issued-token";
        let body = format!(r#"{{"access_token":"{ISSUED}","expires_in":3600,"kind":"Bearer"}}"#);
        let marked = exchange("https://auth.example.com/token", &[(SENSITIVE_RESPONSE, "1")], &[], &body);
        let open = exchange("https://api.example.com/v1", &[], &[], r#"{"kind":"Bearer"}"#);
        let log = sample::log(&format!("got {ISSUED}"));
        let status = json!({ "token": ISSUED, "kind": "Bearer" }).to_string();
        let mut record = with_calls(vec![marked, open.clone(), log], &status);
        redact(&mut record).unwrap();
        assert!(record.redacted);
        assert_eq!(response(&record, 0).body, Body::Text(marker(body.len())));
        assert_eq!(record.steps[0].calls[1], open, "an unmarked response is kept");
        let Import::Log { message, .. } = &record.steps[0].calls[2].import else { panic!("a log") };
        assert_eq!(message, &format!("got {}", marker(ISSUED.len())));
        let Ending::Reconciled(outcome) = &record.steps[0].ending else { panic!("reconciled") };
        assert_eq!(
            outcome.status.as_deref(),
            Some(json!({ "token": marker(ISSUED.len()), "kind": "Bearer" }).to_string().as_str())
        );
        assert!(!text(&record).contains(ISSUED));
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
