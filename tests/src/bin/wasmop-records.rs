//! The records service of the `dnsrecord` sample (`wasmop_tests::records`), for `make run-dns`:
//! serves on 127.0.0.1:18053 with the bearer token in `DNS_API_TOKEN`, and prints the zones'
//! records every few seconds, so changes made through DnsRecords (and by hand with curl) show.

use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let token = std::env::var("DNS_API_TOKEN").unwrap_or_else(|_| "demo-token".into());
    let records = wasmop_tests::records::Records::serve(&token).await?;
    eprintln!("records service on http://{} (token from DNS_API_TOKEN)", wasmop_tests::records::ADDRESS);
    let mut last = String::new();
    loop {
        let now = serde_json::to_string(&records.zone("example.com"))?;
        if now != last {
            println!("example.com: {now}");
            last = now;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
