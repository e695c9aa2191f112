//! Whether an isolated instance can reach a name server. A DNS query is a way out: a resolver
//! forwards any name to the server that name's zone points at, so an instance that can ask
//! one can spell anything it holds into the names it asks for. An isolated (`proxied` or
//! `none`) instance must reach none of the name servers it is configured with; its egress
//! proxy resolves the names it needs, the instance does not.
//!
//! The probe asks each configured server (`/etc/resolv.conf`, at most three) for
//! `bulkhead-selfcheck.invalid` over UDP and tries a TCP connection to it; any answer or
//! accepted connection within [`WAIT`] means a way out. Nothing is learnt from an answer's
//! content (a `.invalid` name never exists).

use std::net::SocketAddr;
use std::time::Duration;

/// Where the C library finds its name servers.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// How long one server may take to answer.
pub const WAIT: Duration = Duration::from_secs(1);

/// The name servers of a `resolv.conf` text, on port 53 (the C library uses the first three).
pub fn name_servers(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("nameserver"))
                .then(|| words.next())
                .flatten()
        })
        .filter_map(|a| {
            // A link-local IPv6 server may carry a zone (`fe80::1%eth0`).
            let a = a.split('%').next().unwrap_or(a);
            a.parse::<std::net::IpAddr>().ok()
        })
        .take(3)
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

/// A query for `bulkhead-selfcheck.invalid`, type A, recursion desired.
fn query() -> Vec<u8> {
    let mut q = vec![0xb1, 0x4d, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["bulkhead-selfcheck", "invalid"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// Whether `server` answers a query over UDP or accepts a TCP connection within `wait`.
async fn answers(server: SocketAddr, wait: Duration) -> Option<&'static str> {
    let udp = async {
        let local: SocketAddr = if server.is_ipv4() {
            "0.0.0.0:0".parse().ok()?
        } else {
            "[::]:0".parse().ok()?
        };
        let s = tokio::net::UdpSocket::bind(local).await.ok()?;
        s.connect(server).await.ok()?;
        s.send(&query()).await.ok()?;
        let mut buf = [0u8; 512];
        s.recv(&mut buf).await.ok().map(|_| "answers over UDP")
    };
    if let Ok(Some(how)) = tokio::time::timeout(wait, udp).await {
        return Some(how);
    }
    match tokio::time::timeout(wait, tokio::net::TcpStream::connect(server)).await {
        Ok(Ok(_)) => Some("accepts TCP"),
        _ => None,
    }
}

/// The first of `servers` this process can reach, and how.
pub async fn reachable(servers: &[SocketAddr], wait: Duration) -> Option<String> {
    for &server in servers {
        if let Some(how) = answers(server, wait).await {
            return Some(format!("the name server {server} {how}"));
        }
    }
    None
}

/// `Err` when an instance of an isolated mode reaches one of its configured name servers.
pub async fn check(mode: crate::policy::NetworkMode) -> Result<(), String> {
    if !mode.is_isolated() {
        return Ok(());
    }
    let servers = name_servers(&std::fs::read_to_string(RESOLV_CONF).unwrap_or_default());
    match reachable(&servers, WAIT).await {
        None => Ok(()),
        Some(way) => Err(format!(
            "network mode `{mode}`, but {way}: a name lookup is a way out (the resolver forwards any name); give the instance no name server it can reach (`bulkhead up` and the generated deployments do)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_servers_are_read_as_the_c_library_does() {
        let text = "# generated\nsearch svc.cluster.local\nnameserver 10.96.0.10\nnameserver fe80::1%eth0\nnameserver not-an-address\nnameserver ::1\nnameserver 10.0.0.4\noptions ndots:5\n";
        let got: Vec<String> = name_servers(text).iter().map(|a| a.to_string()).collect();
        assert_eq!(got, ["10.96.0.10:53", "[fe80::1]:53", "[::1]:53"]);
    }

    #[tokio::test]
    async fn a_server_that_answers_over_udp_is_a_way_out() {
        let server = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let echo = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let (n, from) = server.recv_from(&mut buf).await.unwrap();
            server.send_to(&buf[..n], from).await.unwrap();
            buf[..n].to_vec()
        });
        let way = reachable(&[addr], Duration::from_secs(5)).await;
        assert!(way.as_deref().is_some_and(|w| w.contains("UDP")), "{way:?}");
        assert_eq!(echo.await.unwrap(), query());
    }

    #[tokio::test]
    async fn a_server_that_accepts_tcp_is_a_way_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Nothing answers UDP on that port: the ICMP refusal ends the UDP try at once.
        let way = reachable(&[addr], Duration::from_secs(5)).await;
        assert!(way.as_deref().is_some_and(|w| w.contains("TCP")), "{way:?}");
    }

    #[tokio::test]
    async fn a_server_nothing_reaches_is_no_way_out() {
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        assert_eq!(reachable(&[closed], Duration::from_secs(5)).await, None);
    }
}
