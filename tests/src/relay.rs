//! A TCP relay to an API server that a test can cut: a host whose client goes through it loses
//! its watches while the test still talks to the API server directly. The relay passes bytes
//! through untouched (TLS included), so the host's client only needs the relay's address.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A relay on a loopback port to one upstream address; it stops when dropped.
pub struct Relay {
    address: SocketAddr,
    cut: watch::Sender<bool>,
    accepting: JoinHandle<()>,
}

impl Relay {
    /// Starts relaying connections to `upstream`.
    pub async fn to(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (cut, _) = watch::channel(false);
        let accepting = tokio::spawn(accept(listener, upstream, cut.subscribe()));
        Ok(Self { address, cut, accepting })
    }

    /// The `https` URL of the relay, to put in a client's configuration in place of the API
    /// server's (the API server's certificate names 127.0.0.1, whatever the port).
    pub fn url(&self) -> http::Uri {
        format!("https://{}", self.address).parse().expect("a valid URL")
    }

    /// Closes every connection and refuses new ones until [`Relay::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut.send_replace(true);
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, cut: watch::Receiver<bool>) {
    while let Ok((downstream, _)) = listener.accept().await {
        if !*cut.borrow() {
            tokio::spawn(relay(downstream, upstream, cut.clone()));
        }
    }
}

/// Passes bytes both ways until either side closes or the relay is cut.
async fn relay(mut downstream: TcpStream, upstream: SocketAddr, mut cut: watch::Receiver<bool>) {
    let Ok(mut upstream) = TcpStream::connect(upstream).await else { return };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut downstream, &mut upstream) => {}
        _ = cut.wait_for(|cut| *cut) => {}
    }
}
