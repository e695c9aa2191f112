//! Where the in-server HTTP connector may connect: the internet, and the special-purpose ranges
//! its spec opens (`reach_private`), judged by the address a name resolves to (every address of
//! it, so a name with one public and one internal address is refused) or the address a URL
//! names. Refusals name the range ([`bulkhead_vocab::ranges`], the one list every egress rule
//! uses), so a name pointed at cloud metadata, loopback, a private network, CGNAT, a benchmark
//! network, a unique-local or NAT64 address never carries a request.
//!
//! The same holds for a `url` upstream MCP server ([`client_for`]).
//!
//! On a proxied instance the connector resolves only its proxy's name (the proxy resolves the
//! destination and applies the same ranges), so only an address written in the URL is judged
//! here.

use std::net::{IpAddr, SocketAddr};

use bulkhead_vocab::ranges::{self, Cidr};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why `ip` may not be a destination of connector `connector` with `opened`, if it may not.
pub(crate) fn refused(ip: IpAddr, opened: &[Cidr]) -> Option<String> {
    let r = ranges::special(ip)?;
    let plain = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    };
    if opened.iter().any(|c| c.contains(plain) || c.contains(ip)) {
        return None;
    }
    Some(format!(
        "{ip} is {} (not the internet; the connector's `reach_private` does not open it)",
        r.what
    ))
}

/// A refusal, carried through reqwest's error chain to the caller's error text.
#[derive(Debug, thiserror::Error)]
#[error("{name} resolves to {why}")]
struct Refused {
    name: String,
    why: String,
}

/// The system's resolver, then [`refused`] over every address.
pub(crate) struct PublicOnly {
    pub(crate) opened: Vec<Cidr>,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let opened = self.opened.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(why) = addrs.iter().find_map(|a| refused(a.ip(), &opened)) {
                return Err(Box::new(Refused { name: host, why }) as _);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Why the host written in `url` may not be reached with `opened`, if it is an address that
/// may not be.
pub(crate) fn literal_refused(url: &str, opened: &[Cidr]) -> Option<String> {
    let host = reqwest::Url::parse(url).ok()?.host_str()?.to_string();
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    refused(ip, opened)
}

/// An HTTP client for a `url` upstream: every name it resolves judged by [`refused`] (unless
/// the instance has an egress proxy, which judges them), and the URL's own address refused up
/// front when it is not public and `opened` does not open it.
pub(crate) fn client_for(url: &str, opened: &[Cidr]) -> anyhow::Result<reqwest::Client> {
    if let Some(why) = literal_refused(url, opened) {
        anyhow::bail!("the upstream's address may not be reached: {why}");
    }
    let mut builder = reqwest::Client::builder();
    if crate::config::env::egress_proxy_in(&crate::config::env_lookup).is_none() {
        builder = builder.dns_resolver(PublicOnly {
            opened: opened.to_vec(),
        });
    }
    Ok(builder.build()?)
}
