//! `wasmop-native webhook ADDRESS CERT KEY`: the webpage plugin's admission webhooks written
//! natively, as a careful author would write them with axum and kube's `AdmissionReview` types,
//! for part `admission` of `make bench`. `POST /validate` refuses a WebPage with an empty
//! `spec.html`, naming the field, as the plugin's `validate` does; `POST /mutate` answers the
//! JSON patch that sets `spec.exposed` to `false` when it is absent, as its `default` does.
//!
//! The TLS is the wasmop host's: the same rustls configuration (ring, TLS 1.2 and 1.3, HTTP/1.1)
//! built by the same function from the same PEM files, each connection's handshake beside the
//! accept loop; hyper serves HTTP/1.1 on the runtime the binary's `main` makes
//! (`WASMOP_WORKER_THREADS`).

use std::net::SocketAddr;
use std::path::Path;

use axum::Json;
use axum::routing::post;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use wasmop::webhook::certificate::serving::{Serving, certified};

/// Serves the webhooks on `address` with the certificate `cert` and its key `key` (PEM files)
/// until killed.
pub async fn serve(address: SocketAddr, cert: &Path, key: &Path) -> anyhow::Result<()> {
    let certified = certified(&std::fs::read(cert)?, &std::fs::read(key)?)?;
    let acceptor = TlsAcceptor::from(Serving::new(certified).server_config()?);
    let app = axum::Router::new().route("/validate", post(validate)).route("/mutate", post(mutate));
    let listener = TcpListener::bind(address).await?;
    loop {
        let (tcp, _) = listener.accept().await?;
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = TowerToHyperService::new(app);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

/// The answer to `review`: `decide`'s response to its request, or the review's refusal when it
/// has none.
fn answer(
    review: AdmissionReview<DynamicObject>,
    decide: impl FnOnce(&AdmissionRequest<DynamicObject>) -> AdmissionResponse,
) -> Json<AdmissionReview<DynamicObject>> {
    let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
    Json(match request {
        Ok(request) => decide(&request).into_review(),
        Err(e) => AdmissionResponse::invalid(format!("{e}")).into_review(),
    })
}

/// The webpage plugin's `validate`: an empty `spec.html` is refused, naming the field.
async fn validate(Json(review): Json<AdmissionReview<DynamicObject>>) -> Json<AdmissionReview<DynamicObject>> {
    answer(review, |request| {
        let response = AdmissionResponse::from(request);
        match &request.object {
            Some(page) if page.data["spec"]["html"] == "" => response.deny("spec.html: html must not be empty"),
            _ => response,
        }
    })
}

/// The webpage plugin's `default`: `spec.exposed` is `false` when absent, as a JSON patch.
async fn mutate(Json(review): Json<AdmissionReview<DynamicObject>>) -> Json<AdmissionReview<DynamicObject>> {
    answer(review, |request| {
        let response = AdmissionResponse::from(request);
        match &request.object {
            Some(page) if page.data["spec"].get("exposed").is_none() => {
                let patch: json_patch::Patch =
                    serde_json::from_value(json!([{ "op": "add", "path": "/spec/exposed", "value": false }]))
                        .expect("a JSON patch");
                match response.clone().with_patch(patch) {
                    Ok(patched) => patched,
                    Err(e) => response.deny(format!("the patch does not serialize: {e}")),
                }
            }
            _ => response,
        }
    })
}
