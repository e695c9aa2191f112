//! Which addresses are not the internet: the one home of the address ranges every egress rule
//! uses (squid's policy, each Kubernetes NetworkPolicy, `bulkhead check`, `HostPort`, the jails'
//! egress gate, the review table).
//!
//! Derived from the IANA IPv4 and IPv6 Special-Purpose Address Registries (every entry whose
//! "Globally Reachable" is false or not applicable), plus multicast, the translation and
//! tunnelling prefixes that embed an IPv4 address (a name that resolves to
//! `64:ff9b::7f00:1` reaches 127.0.0.1 through a NAT64 gateway), and the deprecated ranges.
//! Each range is in one of two classes:
//! - [`Class::Never`]: never a destination, whatever a deployment says (loopback, link-local and
//!   cloud metadata, unspecified, documentation, multicast, reserved, translation prefixes);
//! - [`Class::Internal`]: refused unless a deployment names the range (`internal_ranges:`),
//!   for networks that really exist inside an organisation (private, shared, unique-local,
//!   benchmarking).

use std::net::IpAddr;

/// Whether a deployment may open a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Never a destination.
    Never,
    /// A destination only where a deployment names the range.
    Internal,
}

/// One special-purpose range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// CIDR form, network address first.
    pub cidr: &'static str,
    /// Whether a deployment may open it.
    pub class: Class,
    /// What it is (with the RFC that assigns it).
    pub what: &'static str,
}

const fn never(cidr: &'static str, what: &'static str) -> Range {
    Range {
        cidr,
        class: Class::Never,
        what,
    }
}

const fn internal(cidr: &'static str, what: &'static str) -> Range {
    Range {
        cidr,
        class: Class::Internal,
        what,
    }
}

/// Every range that is not the internet, IPv4 first, in registry order.
pub const SPECIAL: &[Range] = &[
    never("0.0.0.0/8", "this network (RFC 791)"),
    internal("10.0.0.0/8", "private use (RFC 1918)"),
    internal("100.64.0.0/10", "shared address space, CGNAT (RFC 6598)"),
    never("127.0.0.0/8", "loopback (RFC 1122)"),
    never("169.254.0.0/16", "link local, cloud metadata (RFC 3927)"),
    internal("172.16.0.0/12", "private use (RFC 1918)"),
    never("192.0.0.0/24", "IETF protocol assignments (RFC 6890)"),
    never("192.0.2.0/24", "documentation, TEST-NET-1 (RFC 5737)"),
    never("192.88.99.0/24", "deprecated 6to4 relay anycast (RFC 7526)"),
    internal("192.168.0.0/16", "private use (RFC 1918)"),
    internal("198.18.0.0/15", "benchmarking (RFC 2544)"),
    never("198.51.100.0/24", "documentation, TEST-NET-2 (RFC 5737)"),
    never("203.0.113.0/24", "documentation, TEST-NET-3 (RFC 5737)"),
    never("224.0.0.0/4", "multicast (RFC 5771)"),
    never(
        "240.0.0.0/4",
        "reserved and limited broadcast (RFC 1112, RFC 919)",
    ),
    never("::/128", "unspecified (RFC 4291)"),
    never("::1/128", "loopback (RFC 4291)"),
    never(
        "::/96",
        "deprecated IPv4-compatible, embeds an IPv4 address (RFC 4291)",
    ),
    never("::ffff:0:0/96", "IPv4-mapped (RFC 4291)"),
    never("64:ff9b::/96", "IPv4/IPv6 translation, NAT64 (RFC 6052)"),
    never(
        "64:ff9b:1::/48",
        "local-use IPv4/IPv6 translation (RFC 8215)",
    ),
    never("100::/64", "discard-only (RFC 6666)"),
    never("100:0:0:1::/64", "dummy IPv6 prefix (RFC 9780)"),
    never("2001::/23", "IETF protocol assignments (RFC 2928)"),
    never("2001::/32", "Teredo (RFC 4380)"),
    internal("2001:2::/48", "benchmarking (RFC 5180)"),
    never("2001:10::/28", "deprecated ORCHID (RFC 4843)"),
    never("2001:20::/28", "ORCHIDv2 (RFC 7343)"),
    never("2001:db8::/32", "documentation (RFC 3849)"),
    never("2002::/16", "6to4 (RFC 3056)"),
    never("3fff::/20", "documentation (RFC 9637)"),
    never("5f00::/16", "segment routing SIDs (RFC 9602)"),
    internal("fc00::/7", "unique local (RFC 4193)"),
    never("fe80::/10", "link local (RFC 4291)"),
    never("fec0::/10", "deprecated site local (RFC 3879)"),
    never("ff00::/8", "multicast (RFC 4291)"),
];

/// The ranges of `class`, in registry order.
pub fn of(class: Class) -> impl Iterator<Item = &'static Range> {
    SPECIAL.iter().filter(move |r| r.class == class)
}

/// The ranges that no other range of [`SPECIAL`] contains, in registry order: the list for a
/// matcher that drops nested entries. (squid's `dst` ACL keeps one of two nested ranges, not
/// always the outer one: given `::/128 ::/96` it matched `::7f00:1` against neither.)
pub fn outermost() -> impl Iterator<Item = &'static Range> {
    SPECIAL.iter().filter(|r| {
        let inner = Cidr::parse(r.cidr);
        !SPECIAL.iter().any(|o| {
            o.cidr != r.cidr
                && inner
                    .zip(Cidr::parse(o.cidr))
                    .is_some_and(|(i, o)| i.within(o))
        })
    })
}

/// The ranges a connector's `reach_private` opens (entries that are empty after expansion open
/// nothing), or why an entry is not a CIDR range with its host bits clear.
pub fn opened(entries: &[String]) -> Result<Vec<Cidr>, String> {
    let mut out = Vec::new();
    for e in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        match Cidr::parse(e).filter(|c| c.is_network()) {
            Some(c) => out.push(c),
            None => {
                return Err(format!(
                    "`{e}` is not a CIDR range with its host bits clear (e.g. 10.20.0.0/16)"
                ));
            }
        }
    }
    Ok(out)
}

/// A parsed CIDR range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    /// Network address.
    pub ip: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` or `x::y/n` (false for a malformed range).
    pub fn parse(range: &str) -> Option<Cidr> {
        let (ip, len) = range.split_once('/')?;
        let ip: IpAddr = ip.parse().ok()?;
        let len: u8 = len.parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        (len <= max).then_some(Cidr { ip, len })
    }

    /// Whether this range lies inside `outer` (same family).
    pub fn within(self, outer: Cidr) -> bool {
        if self.ip.is_ipv4() != outer.ip.is_ipv4() || self.len < outer.len {
            return false;
        }
        let (a, width) = bits(self.ip);
        let (b, _) = bits(outer.ip);
        let shift = u32::from(width - outer.len) + if width == 32 { 96 } else { 0 };
        shift >= 128 || (a >> shift) == (b >> shift)
    }

    /// Whether `ip` is in this range.
    pub fn contains(self, ip: IpAddr) -> bool {
        let len = if ip.is_ipv4() { 32 } else { 128 };
        Cidr { ip, len }.within(self)
    }

    /// Whether the host bits are clear (the network address is written).
    pub fn is_network(self) -> bool {
        let (a, width) = bits(self.ip);
        let host_bits = u32::from(width - self.len);
        if host_bits == 0 {
            return true;
        }
        let low = u128::MAX >> (128 - host_bits);
        let low = if width == 32 { low << 96 } else { low };
        a & low == 0
    }
}

fn bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)) << 96, 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

/// The special-purpose range `ip` falls in, if any: the most specific one, so the reason names
/// what the address is (an IPv4-mapped IPv6 address is judged as the IPv4 address it maps, and
/// as `::ffff:0:0/96`).
pub fn special(ip: IpAddr) -> Option<&'static Range> {
    let v4 = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    let hit = |ip: IpAddr| {
        SPECIAL
            .iter()
            .filter_map(|r| {
                Cidr::parse(r.cidr)
                    .filter(|c| c.contains(ip))
                    .map(|c| (c.len, r))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, r)| r)
    };
    v4.and_then(hit).or_else(|| hit(ip))
}

/// Why `ip` may not be a destination when a deployment opened `opened` (CIDR ranges), or
/// `None` when it may: the internet, or an internal range that `opened` covers.
pub fn refused(ip: IpAddr, opened: &[String]) -> Option<&'static Range> {
    let r = special(ip)?;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        IpAddr::V4(_) => ip,
    };
    let open = r.class == Class::Internal
        && opened
            .iter()
            .filter_map(|o| Cidr::parse(o))
            .any(|o| o.contains(ip));
    (!open).then_some(r)
}

/// `Ok` when `range` is a CIDR range a deployment may open: inside an [`Class::Internal`]
/// range, with its host bits clear, touching no [`Class::Never`] range.
pub fn openable(range: &str) -> Result<(), String> {
    let Some(r) = Cidr::parse(range) else {
        return Err("expected a CIDR range such as 10.20.0.0/16".into());
    };
    if !r.is_network() {
        return Err("host bits are set: write the network address".into());
    }
    if let Some(n) =
        of(Class::Never).find(|n| Cidr::parse(n.cidr).is_some_and(|n| r.within(n) || n.within(r)))
    {
        return Err(format!("{} is never reachable", n.what));
    }
    if !of(Class::Internal).any(|n| Cidr::parse(n.cidr).is_some_and(|n| r.within(n))) {
        let names: Vec<&str> = of(Class::Internal).map(|n| n.cidr).collect();
        return Err(format!(
            "not inside an internal range ({}); public addresses need no entry",
            names.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_parses_as_a_network_address() {
        for r in SPECIAL {
            let c = Cidr::parse(r.cidr).unwrap_or_else(|| panic!("{}", r.cidr));
            assert!(c.is_network(), "{}", r.cidr);
        }
    }

    #[test]
    fn translation_and_special_addresses_are_refused() {
        for ip in [
            "64:ff9b::7f00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2001:0:5ef5:79fd::1",
            "fec0::1",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "ff02::1",
            "240.0.0.1",
            "255.255.255.255",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "100.64.0.1",
            "169.254.169.254",
            "0.1.2.3",
            "::1",
            "192.0.2.7",
            "fd00::1",
            "::7f00:1",
            "::a00:1",
            "100:0:0:1::7",
            "2001:1::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(refused(ip, &[]).is_some(), "{ip} must be refused");
        }
        for ip in ["93.184.215.14", "2606:4700::1", "8.8.8.8", "192.52.193.1"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(refused(ip, &[]).is_none(), "{ip} is the internet");
        }
    }

    #[test]
    fn a_deployment_opens_internal_ranges_only() {
        let opened = vec!["10.20.0.0/16".to_string(), "198.18.0.0/15".to_string()];
        assert!(refused("10.20.1.1".parse().unwrap(), &opened).is_none());
        assert!(refused("::ffff:10.20.1.1".parse().unwrap(), &opened).is_none());
        assert!(refused("198.18.3.4".parse().unwrap(), &opened).is_none());
        assert!(refused("10.21.1.1".parse().unwrap(), &opened).is_some());
        // Opening a range never opens a Never one, even when written over it.
        let wide = vec!["0.0.0.0/0".to_string()];
        assert!(refused("127.0.0.1".parse().unwrap(), &wide).is_some());
    }

    #[test]
    fn openable_ranges() {
        for ok in [
            "10.20.0.0/16",
            "172.16.0.0/12",
            "192.168.1.0/24",
            "100.64.0.0/10",
            "fd00:1::/32",
            "10.1.2.3/32",
            "198.18.0.0/15",
        ] {
            assert!(openable(ok).is_ok(), "{ok}: {:?}", openable(ok));
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
            "64:ff9b::/96",
        ] {
            assert!(openable(bad).is_err(), "{bad}");
        }
    }

    /// Every block of a registry copy (`data/`) whose "Globally Reachable" is not `True`, each
    /// with its name.
    fn not_global(file: &str) -> Vec<(String, String)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data")
            .join(file);
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let head = reader.headers().unwrap().clone();
        let col = |name: &str| head.iter().position(|h| h == name).unwrap();
        let (block, name, global) = (col("Address Block"), col("Name"), col("Globally Reachable"));
        let mut out = Vec::new();
        for row in reader.records() {
            let row = row.unwrap();
            if row[global].starts_with("True") {
                continue;
            }
            for cidr in row[block].split(',') {
                // Footnote marks (`192.0.0.0/24 [2]`) follow the block.
                let cidr = cidr.split_whitespace().next().unwrap().to_string();
                out.push((cidr, row[name].to_string()));
            }
        }
        assert!(out.len() > 10, "{}: too few entries read", path.display());
        out
    }

    #[test]
    fn every_registry_entry_that_is_not_globally_reachable_is_special() {
        for file in [
            "iana-ipv4-special-registry.csv",
            "iana-ipv6-special-registry.csv",
        ] {
            for (cidr, name) in not_global(file) {
                let block = Cidr::parse(&cidr).unwrap_or_else(|| panic!("{file}: {cidr}"));
                let covered = SPECIAL
                    .iter()
                    .filter_map(|r| Cidr::parse(r.cidr))
                    .any(|r| block.within(r));
                assert!(covered, "{file}: {cidr} ({name}) is in no range of SPECIAL");
                assert!(
                    refused(block.ip, &[]).is_some(),
                    "{file}: {cidr} ({name}) is not refused"
                );
            }
        }
    }

    #[test]
    fn the_ranges_beyond_the_registries_are_listed() {
        // Not in the special-purpose registries, refused all the same: each embeds an IPv4
        // address or is no unicast destination.
        for cidr in [
            "::/96",
            "64:ff9b::/96",
            "224.0.0.0/4",
            "ff00::/8",
            "fec0::/10",
        ] {
            assert!(SPECIAL.iter().any(|r| r.cidr == cidr), "{cidr}");
        }
    }

    #[test]
    fn the_outermost_ranges_cover_every_range_and_nest_in_none() {
        let outer: Vec<Cidr> = outermost().filter_map(|r| Cidr::parse(r.cidr)).collect();
        for r in SPECIAL {
            let c = Cidr::parse(r.cidr).unwrap();
            assert!(
                outer.iter().any(|o| c.within(*o)),
                "{} is not covered",
                r.cidr
            );
        }
        for (i, a) in outer.iter().enumerate() {
            for (j, b) in outer.iter().enumerate() {
                assert!(i == j || !a.within(*b), "{a:?} is inside {b:?}");
            }
        }
        assert!(!outermost().any(|r| r.cidr == "::1/128" || r.cidr == "2001::/32"));
    }

    #[test]
    fn the_reason_is_the_most_specific_range() {
        let what = |ip: &str| special(ip.parse().unwrap()).unwrap().what;
        assert!(what("::1").starts_with("loopback"), "{}", what("::1"));
        assert!(what("2001::1").starts_with("Teredo"), "{}", what("2001::1"));
        assert!(what("::7f00:1").contains("IPv4-compatible"));
    }
}
