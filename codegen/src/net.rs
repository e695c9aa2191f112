//! Address ranges of the egress rules: which destinations count as internal (refused by default
//! when an allowlisted name resolves into them) and the ranges a deployment may open up. One
//! home for the squid policy, the Kubernetes NetworkPolicy and `bulkhead check`.

use std::net::IpAddr;

/// Never reached through the proxy, whatever the spec says: unspecified, loopback, link-local
/// (cloud metadata, `169.254.169.254`, `fd00:ec2::254` is covered by fc00::/7 below).
pub const NEVER: &[&str] = &[
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "::/128",
    "::1/128",
    "fe80::/10",
];

/// Internal unless a deployment names the range: private, shared (CGNAT) and unique-local.
pub const INTERNAL: &[&str] = &[
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "fc00::/7",
];

fn parse(range: &str) -> Option<(IpAddr, u8)> {
    let (ip, len) = range.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}

fn bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)) << 96, 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

/// Whether `inner` lies within `outer` (same family).
fn within(inner: (IpAddr, u8), outer: (IpAddr, u8)) -> bool {
    if inner.0.is_ipv4() != outer.0.is_ipv4() || inner.1 < outer.1 {
        return false;
    }
    let (a, width) = bits(inner.0);
    let (b, _) = bits(outer.0);
    let shift = u32::from(width - outer.1) + if width == 32 { 96 } else { 0 };
    if shift >= 128 {
        return true;
    }
    (a >> shift) == (b >> shift)
}

/// Whether CIDR range `inner` lies inside CIDR range `outer` (false when either is malformed).
pub fn range_within(inner: &str, outer: &str) -> bool {
    match (parse(inner), parse(outer)) {
        (Some(i), Some(o)) => within(i, o),
        _ => false,
    }
}

/// `Ok` when `range` is a CIDR range inside [`INTERNAL`] with its host bits clear.
pub fn internal_range(range: &str) -> Result<(), String> {
    let Some(r) = parse(range) else {
        return Err("expected a CIDR range such as 10.20.0.0/16".into());
    };
    let (a, width) = bits(r.0);
    let host_bits = u32::from(width - r.1);
    let mask = if host_bits == 0 {
        0
    } else {
        (u128::MAX >> (128 - host_bits)) << (128 - u32::from(width))
    };
    let masked_ok = match r.0 {
        IpAddr::V4(_) => (a >> 96) & (mask >> 96) == 0,
        IpAddr::V6(_) => {
            a & (if host_bits == 0 {
                0
            } else {
                u128::MAX >> (128 - host_bits)
            }) == 0
        }
    };
    if !masked_ok {
        return Err("host bits are set: write the network address".into());
    }
    if NEVER
        .iter()
        .filter_map(|n| parse(n))
        .any(|n| within(r, n) || within(n, r))
    {
        return Err(
            "loopback, link-local (cloud metadata) and unspecified addresses are never reachable"
                .into(),
        );
    }
    if !INTERNAL
        .iter()
        .filter_map(|n| parse(n))
        .any(|n| within(r, n))
    {
        return Err("not inside a private (10/8, 172.16/12, 192.168/16), shared (100.64/10) or unique-local (fc00::/7) range; public addresses need no entry".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::internal_range;

    #[test]
    fn ranges() {
        for ok in [
            "10.20.0.0/16",
            "172.16.0.0/12",
            "192.168.1.0/24",
            "100.64.0.0/10",
            "fd00:1::/32",
            "10.1.2.3/32",
        ] {
            assert!(internal_range(ok).is_ok(), "{ok}: {:?}", internal_range(ok));
        }
        for bad in [
            "0.0.0.0/0",
            "127.0.0.0/8",
            "169.254.169.254/32",
            "8.8.8.0/24",
            "10.1.2.3/8",
            "10.0.0.0",
            "fe80::/10",
            "::1/128",
            "10.0.0.0/33",
            "198.18.0.0/15",
        ] {
            assert!(internal_range(bad).is_err(), "{bad}");
        }
    }
}
