//! A small external service for the external-dependent tests and the `dnsrecord` sample: DNS
//! records in zones, over HTTP with a bearer token, on a fixed local port (the sample's granted
//! origin). It counts what it is asked, can change a record out of band, and can be made slow
//! (answering after any client timeout).
//!
//! - `GET /records` lists every zone's records, each with its `zone`;
//! - `GET /zones/{zone}/records` lists a zone; `GET /zones/{zone}/records/{id}` reads one;
//! - `POST /zones/{zone}/records` creates one (`201`, the record with its new `id`);
//! - `PUT /zones/{zone}/records/{id}` replaces one; `DELETE /zones/{zone}/records/{id}` deletes it.
//!
//! Every request without `authorization: Bearer <token>` gets `401`.
//!
//! Every request is logged on arrival ([`Records::received`]) with the process that sent it,
//! when that is a child of this test process (a `wasmop run` replica): the one holding the
//! client's end of the connection, found through `/proc` (Linux). Writes to a zone can be made
//! slow on their own ([`Records::set_write_delay`]), reads staying quick.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

/// The address the `dnsrecord` sample's HTTP grant names.
pub const ADDRESS: &str = "127.0.0.1:18053";
/// The same as the origin the grant names: plain HTTP, which the operator must allow the
/// sample's token to go to (`allowPlainHttpSecrets`, see [`crate::allowing`]).
pub const ORIGIN: &str = "http://127.0.0.1:18053";

/// One record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Given by the service.
    #[serde(default)]
    pub id: String,
    /// The record's name within its zone.
    pub name: String,
    /// `A`, `CNAME`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// Its value.
    pub value: String,
    /// Time to live, in seconds.
    #[serde(default)]
    pub ttl: u32,
}

#[derive(Default)]
struct Inner {
    zones: Mutex<BTreeMap<String, BTreeMap<String, Record>>>,
    next: AtomicU64,
    creates: AtomicU64,
    requests: AtomicU64,
    /// `GET /records` answered.
    all_lists: AtomicU64,
    /// Milliseconds every answer about a zone waits first, by zone.
    delays: Mutex<BTreeMap<String, u64>>,
    /// Milliseconds every write (not a `GET`) to a zone waits first, besides its zone's delay.
    write_delays: Mutex<BTreeMap<String, u64>>,
    /// Every request, in the order of arrival.
    received: Mutex<Vec<Received>>,
}

/// A request the service received, as it arrived (before any delay).
#[derive(Clone, Debug)]
pub struct Received {
    /// When it arrived.
    pub at: Instant,
    /// Its method.
    pub method: Method,
    /// Its path, without the query.
    pub path: String,
    /// The process that sent it, when it is a child of this test process (a replica the test
    /// started); `None` for any other sender, or when `/proc` cannot tell.
    pub sender: Option<u32>,
}

impl Received {
    /// The zone it is about (`/zones/{zone}/...`), if any.
    pub fn zone(&self) -> Option<&str> {
        self.path.strip_prefix("/zones/")?.split('/').next()
    }
}

/// A running records service.
#[derive(Clone)]
pub struct Records {
    inner: Arc<Inner>,
    token: String,
}

impl Records {
    /// Serves on [`ADDRESS`], accepting `token`, until the process ends.
    pub async fn serve(token: &str) -> anyhow::Result<Self> {
        let address: SocketAddr = ADDRESS.parse()?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| anyhow::anyhow!("the records service needs {ADDRESS} (the sample's granted origin): {e}"))?;
        let records = Self { inner: Arc::new(Inner::default()), token: token.to_owned() };
        let app = axum::Router::new()
            .route("/records", get(list_all))
            .route("/zones/{zone}/records", get(list).post(create))
            .route("/zones/{zone}/records/{id}", get(read).put(replace).delete(remove))
            .layer(axum::middleware::from_fn_with_state(records.clone(), receive))
            .with_state(records.clone());
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        Ok(records)
    }

    /// The service of this test process, started on its own thread the first time (tests run
    /// on runtimes of their own, which end with them), accepting `token`.
    pub fn shared(token: &str) -> anyhow::Result<Self> {
        static SHARED: std::sync::OnceLock<Result<Records, String>> = std::sync::OnceLock::new();
        let token = token.to_owned();
        let shared = SHARED.get_or_init(move || {
            Records::serving(&token).map(|(records, serving)| {
                // Served until the process ends.
                std::mem::forget(serving);
                records
            })
        });
        shared.clone().map_err(|e| anyhow::anyhow!(e))
    }

    /// The service on a thread of its own, accepting `token`, until the [`Serving`] is
    /// dropped: then [`ADDRESS`] is closed.
    pub fn serving(token: &str) -> Result<(Self, Serving), String> {
        let token = token.to_owned();
        let (served, started) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                served.send(Records::serve(&token).await.map_err(|e| e.to_string())).ok();
                stopped.await.ok();
            });
        });
        let records = started.recv().unwrap_or_else(|_| Err("the records service thread died".into()))?;
        Ok((records, Serving { stop: Some(stop), thread: Some(thread) }))
    }

    /// The records of `zone`.
    pub fn zone(&self, zone: &str) -> Vec<Record> {
        self.inner.zones.lock().unwrap().get(zone).map(|z| z.values().cloned().collect()).unwrap_or_default()
    }

    /// Records created so far, in every zone.
    pub fn creates(&self) -> u64 {
        self.inner.creates.load(Ordering::SeqCst)
    }

    /// Requests answered so far (authenticated or not).
    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::SeqCst)
    }

    /// Adds `record` to `zone` out of band (as someone else would), with a new ID.
    pub fn insert(&self, zone: &str, mut record: Record) -> Record {
        record.id = format!("rec-{}", self.inner.next.fetch_add(1, Ordering::SeqCst) + 1);
        self.inner.zones.lock().unwrap().entry(zone.to_owned()).or_default().insert(record.id.clone(), record.clone());
        record
    }

    /// `GET /records` (every zone, as a global poll asks) answered so far.
    pub fn all_lists(&self) -> u64 {
        self.inner.all_lists.load(Ordering::SeqCst)
    }

    /// Changes a record's value out of band; false when there is no such record.
    pub fn set_value(&self, zone: &str, name: &str, value: &str) -> bool {
        let mut zones = self.inner.zones.lock().unwrap();
        let record = zones.get_mut(zone).and_then(|z| z.values_mut().find(|r| r.name == name));
        record.map(|r| r.value = value.to_owned()).is_some()
    }

    /// Makes every answer about `zone` wait `delay` first (zero: answer at once); other zones
    /// (other tests) are not slowed.
    pub fn set_delay(&self, zone: &str, delay: Duration) {
        self.inner.delays.lock().unwrap().insert(zone.to_owned(), delay.as_millis() as u64);
    }

    /// Makes every write (`POST`, `PUT`, `DELETE`) to `zone` wait `delay` first, on top of
    /// [`Records::set_delay`]; its reads are not slowed.
    pub fn set_write_delay(&self, zone: &str, delay: Duration) {
        self.inner.write_delays.lock().unwrap().insert(zone.to_owned(), delay.as_millis() as u64);
    }

    /// The requests about `zone` received so far, in the order of arrival.
    pub fn received(&self, zone: &str) -> Vec<Received> {
        let received = self.inner.received.lock().unwrap();
        received.iter().filter(|r| r.zone() == Some(zone)).cloned().collect()
    }

    /// Counts the request, waits the zone's delay, and checks the token.
    async fn admit(&self, headers: &HeaderMap, zone: Option<&str>) -> Result<(), Response> {
        self.inner.requests.fetch_add(1, Ordering::SeqCst);
        let delay = zone.and_then(|z| self.inner.delays.lock().unwrap().get(z).copied()).unwrap_or(0);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let expected = format!("Bearer {}", self.token);
        match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some(given) if given == expected => Ok(()),
            _ => Err((StatusCode::UNAUTHORIZED, "a bearer token is required").into_response()),
        }
    }
}

/// The records service running; dropping it stops the service and closes its port.
pub struct Serving {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        drop(self.stop.take());
        // The runtime, and the server on it, end with the thread.
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

/// Logs each request on arrival with its sender, then holds a write to a zone with a write
/// delay before it goes on.
async fn receive(
    State(s): State<Records>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let at = Instant::now();
    let received = Received {
        at,
        method: request.method().clone(),
        path: request.uri().path().to_owned(),
        sender: sender_of(peer),
    };
    let delay = match received.zone() {
        Some(zone) if received.method != Method::GET => s.inner.write_delays.lock().unwrap().get(zone).copied(),
        _ => None,
    };
    s.inner.received.lock().unwrap().push(received);
    if let Some(delay) = delay.filter(|ms| *ms > 0) {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    next.run(request).await
}

/// The child of this process that holds the client's end `peer` of a connection to
/// [`ADDRESS`]: the socket `/proc/net/tcp` lists from `peer` to the service, and the child that
/// has that socket among its file descriptors. `None` for an IPv6 client or any other sender.
fn sender_of(peer: SocketAddr) -> Option<u32> {
    let (SocketAddr::V4(peer), Ok(SocketAddr::V4(service))) = (peer, ADDRESS.parse::<SocketAddr>()) else {
        return None;
    };
    // `/proc/net/tcp` writes an IPv4 address as the hex of its four bytes read as a native
    // (little-endian) integer, and the port in hex: 127.0.0.1:18053 is `0100007F:4685`.
    let hex = |a: std::net::SocketAddrV4| format!("{:08X}:{:04X}", u32::from_le_bytes(a.ip().octets()), a.port());
    let (local, remote) = (hex(peer), hex(service));
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = table.lines().skip(1).find_map(|line| {
        // sl, local_address, rem_address, st, tx_queue:rx_queue, tr:tm->when, retrnsmt, uid,
        // timeout, inode.
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&local.as_str()) && fields.get(2) == Some(&remote.as_str()))
            .then(|| fields.get(9).map(|inode| inode.to_string()))?
    })?;
    let socket = std::ffi::OsString::from(format!("socket:[{inode}]"));
    children().into_iter().find(|pid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
        fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == socket))
    })
}

/// The processes this one started, from every thread's `/proc/self/task/*/children`.
fn children() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|pids| pids.split_whitespace().filter_map(|pid| pid.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

type Zone = Path<String>;

async fn list(State(s): State<Records>, Path(zone): Zone, headers: HeaderMap) -> Response {
    if let Err(denied) = s.admit(&headers, Some(&zone)).await {
        return denied;
    }
    Json(s.zone(&zone)).into_response()
}

async fn list_all(State(s): State<Records>, headers: HeaderMap) -> Response {
    if let Err(denied) = s.admit(&headers, None).await {
        return denied;
    }
    s.inner.all_lists.fetch_add(1, Ordering::SeqCst);
    let zones = s.inner.zones.lock().unwrap();
    let all: Vec<serde_json::Value> = zones
        .iter()
        .flat_map(|(zone, records)| {
            records.values().map(move |r| {
                let mut record = serde_json::to_value(r).unwrap_or_default();
                record["zone"] = serde_json::Value::String(zone.clone());
                record
            })
        })
        .collect();
    Json(all).into_response()
}

async fn read(State(s): State<Records>, Path((zone, id)): Path<(String, String)>, headers: HeaderMap) -> Response {
    if let Err(denied) = s.admit(&headers, Some(&zone)).await {
        return denied;
    }
    match s.inner.zones.lock().unwrap().get(&zone).and_then(|z| z.get(&id)) {
        Some(record) => Json(record.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn create(State(s): State<Records>, Path(zone): Zone, headers: HeaderMap, Json(mut r): Json<Record>) -> Response {
    if let Err(denied) = s.admit(&headers, Some(&zone)).await {
        return denied;
    }
    r.id = format!("rec-{}", s.inner.next.fetch_add(1, Ordering::SeqCst) + 1);
    s.inner.creates.fetch_add(1, Ordering::SeqCst);
    s.inner.zones.lock().unwrap().entry(zone).or_default().insert(r.id.clone(), r.clone());
    (StatusCode::CREATED, Json(r)).into_response()
}

async fn replace(
    State(s): State<Records>,
    Path((zone, id)): Path<(String, String)>,
    headers: HeaderMap,
    Json(mut r): Json<Record>,
) -> Response {
    if let Err(denied) = s.admit(&headers, Some(&zone)).await {
        return denied;
    }
    let mut zones = s.inner.zones.lock().unwrap();
    match zones.get_mut(&zone).and_then(|z| z.get_mut(&id)) {
        Some(record) => {
            r.id = id;
            *record = r.clone();
            Json(r).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn remove(State(s): State<Records>, Path((zone, id)): Path<(String, String)>, headers: HeaderMap) -> Response {
    if let Err(denied) = s.admit(&headers, Some(&zone)).await {
        return denied;
    }
    match s.inner.zones.lock().unwrap().get_mut(&zone).and_then(|z| z.remove(&id)) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
